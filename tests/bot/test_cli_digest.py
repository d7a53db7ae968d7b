"""`l4 digest` as a user runs it (a real subprocess): text, JSON, the plot, posting, bad input."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import digest_seed, png
from tests.helpers.fake_slack import FakeSlack
from tests.helpers.wait import WAIT

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def db_url(tmp_path_factory):
    return digest_seed.seeded_database(tmp_path_factory.mktemp("cli-digest") / "kb.db")


def l4(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "L4_"))}
    full.update(env, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "bot.cli", "digest", *args], capture_output=True, text=True,
                          env=full, cwd=cwd, timeout=WAIT)


def test_text_json_and_png(db_url, tmp_path) -> None:
    r = l4(env={"L4_DATABASE_URL": db_url}, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("L4 digest: the last 7 days") and "node-02: drain" in r.stdout
    r = l4("--days", "14", "--format", "json", "--png", str(tmp_path / "p.png"),
           env={"L4_DATABASE_URL": db_url}, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["days"] == 14 and doc["diagnoses"] == 12 and doc["jobs"] == 10
    assert [(p["pattern_id"], p["count"]) for p in doc["patterns"][:2]] == [("nic-link-down", 4),
                                                                           ("xid-79-fallen-off-bus", 4)]
    assert png.size((tmp_path / "p.png").read_bytes()) == (960, 540)


@pytest.mark.parametrize("args,env,message", [
    (["--days", "0"], {}, "days must be a whole number from 1 to 365, got 0"),
    (["--days", "x"], {}, "days must be a whole number from 1 to 365"),
    (["--post"], {"L4_DIGEST_CHANNEL": "C1"}, "--post needs SLACK_BOT_TOKEN"),
    (["--post"], {"SLACK_BOT_TOKEN": "xoxb-secret"}, "--post needs a channel"),
])
def test_bad_input_is_one_line_exit_2(db_url, tmp_path, args, env, message) -> None:
    r = l4(*args, env={"L4_DATABASE_URL": db_url, **env}, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and message in r.stderr and not r.stdout
    assert "xoxb-secret" not in r.stderr


def test_post_to_fake_slack(db_url, tmp_path) -> None:
    with FakeSlack() as slack:
        env = {"L4_DATABASE_URL": db_url, "SLACK_BOT_TOKEN": "xoxb-test", "SLACK_API_URL": slack.api_url,
               "L4_DIGEST_CHANNEL": "C0DIGEST"}
        r = l4("--post", env=env, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert "posted to C0DIGEST" in r.stderr
        (post,) = slack.calls_to("chat.postMessage")
        assert post.params["channel"] == "C0DIGEST"
        assert [u.filename for u in slack.uploads.values() if u.completed] == ["l4-digest-patterns.png"]
        slack.fail_next("chat.postMessage", status=200, error="not_in_channel", retry_after=None)
        r = l4("--post", "--channel", "C0OTHER", env=env, cwd=tmp_path)
        assert r.returncode == 1 and "Slack refused the digest: not_in_channel" in r.stderr
        assert r.stderr.count("\n") == 1
