"""`l4 bot` as a real subprocess: HTTP mode answers signed requests; bad configuration is one line."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.bot.slack.conftest import fault_job
from tests.helpers.fake_slack import FakeSlack
from tests.helpers.slack_requests import event_body, message_event, post_signed
from tests.helpers.wait import WAIT

SECRET = "cli-secret"


def _env(slack_url: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "L4_"))}
    env.update({"SLACK_BOT_TOKEN": "xoxb-cli", "SLACK_API_URL": slack_url,
                "L4_DATABASE_URL": f"sqlite:///{tmp_path / 'kb.db'}", "L4_LOG_ROOT": str(tmp_path / "jobs")})
    env.update(extra)
    return env


def test_http_mode_serves_signed_events(tmp_path: Path):
    fault_job(tmp_path / "jobs" / "job-0007", fault_node=0)
    with FakeSlack() as slack:
        proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "bot", "--http", "--port", "0"],
                                env=_env(slack.api_url, tmp_path, SLACK_SIGNING_SECRET=SECRET), cwd=tmp_path,
                                stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            seen = []
            for _ in range(20):
                seen.append(proc.stderr.readline())
                m = re.search(r"http://127\.0\.0\.1:(\d+)/slack/events", seen[-1])
                if m or not seen[-1]:
                    break
            assert m, seen
            url = f"http://127.0.0.1:{m.group(1)}/slack/events"
            assert post_signed(url, "wrong", event_body(message_event("C1", "U1", "job-0007"))).status == 401
            assert post_signed(url, SECRET, event_body(message_event("C1", "U1", "job-0007"))).status == 200
            slack.wait_for_call("chat.update",
                                where=lambda c: "L4 diagnosis of job-0007" in str(c.params))
            assert len(slack.calls_to("chat.postMessage")) == 1
        finally:
            proc.terminate()
            proc.wait(timeout=WAIT)


def test_missing_configuration_is_one_line(tmp_path: Path):
    def run(*args: str, **env: str) -> subprocess.CompletedProcess:
        base = _env("http://127.0.0.1:9/api/", tmp_path)
        base.update(env)
        for k in [k for k, v in base.items() if v == ""]:
            del base[k]
        return subprocess.run([sys.executable, "-m", "bot.cli", "bot", *args], env=base, cwd=tmp_path,
                              capture_output=True, text=True, timeout=WAIT)

    r = run("--http", "--port", "0")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "SLACK_SIGNING_SECRET" in r.stderr
    r = run("--http", "--port", "0", SLACK_BOT_TOKEN="", SLACK_SIGNING_SECRET="s")
    assert r.returncode == 2 and "SLACK_BOT_TOKEN is not set" in r.stderr and r.stderr.count("\n") == 1
    r = run()
    assert r.returncode == 2 and "SLACK_APP_TOKEN" in r.stderr and r.stderr.count("\n") == 1
    r = run(SLACK_APP_TOKEN="xapp-cli", L4_REPORT_NETWORKS="10.0.0.0/33")  # checked before starting
    assert r.returncode == 2 and "L4_REPORT_NETWORKS" in r.stderr and r.stderr.count("\n") == 1
    r = run(SLACK_APP_TOKEN="xapp-cli", L4_DIGEST_CHANNEL="C1", L4_DIGEST_CRON="every monday")
    assert r.returncode == 2 and "L4_DIGEST_CRON" in r.stderr and r.stderr.count("\n") == 1
    with FakeSlack() as slack:  # Slack refuses the token
        slack.fail_next("auth.test", status=200, error="invalid_auth", retry_after=None)
        r = run(SLACK_APP_TOKEN="xapp-cli", SLACK_API_URL=slack.api_url)
    assert r.returncode == 1 and r.stderr.splitlines()[-1].startswith("l4 bot: cannot start:"), r.stderr
    assert "invalid_auth" in r.stderr and "xoxb-cli" not in r.stderr and "Traceback" not in r.stderr


_SIGNAL_ON_ANOTHER_THREAD = """
import signal, sys, threading, time
from bot import cli_bot
signal.signal(signal.SIGTERM, cli_bot._stop_like_ctrl_c)
def send():
    time.sleep(0.3)
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)  # this thread takes it, as the kernel may
threading.Thread(target=send, daemon=True).start()
try:
    cli_bot._wait_for_a_signal()
except KeyboardInterrupt:
    print("stopped")
"""


def test_a_sigterm_another_thread_receives_still_stops_the_socket_mode_wait():
    """The kernel may hand SIGTERM to any thread (the Socket Mode client runs several); CPython runs the
    handler in the main thread only when it wakes, so the wait must wake by itself (Bolt's untimed
    `Event().wait()` hung in CI)."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _SIGNAL_ON_ANOTHER_THREAD], cwd=root, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(root)})
    assert done.returncode == 0 and done.stdout.strip() == "stopped", done.stderr[-2000:]
