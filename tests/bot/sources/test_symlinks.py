"""Links out of the log root are never followed: a job folder that is one is refused, a rank file,
folder or job.json inside a job that is one is skipped and listed, never read (CLI, triage, bot)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.config import Settings
from bot.resolve import resolve
from bot.triage import TriageRequest, triage
from engine.ingest import JobError, discover
from tests.helpers.jobs import make_job, write_rank
from tests.helpers.slack_bot import BotHarness
from tests.helpers.slack_requests import message_event
from tests.helpers.wait import WAIT

SECRET = "SECRET-TOKEN=hunter2-do-not-post"
SECRET_LINES = [f"[rank9]: [2026-05-01 10:03:00,123] [ERROR] RuntimeError: {SECRET} rejected by the store"
                for _ in range(5)]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the log root holding a secret, in rank-file form and as a whole job."""
    out = tmp_path / "outside"
    write_rank(out / "secret.log", SECRET_LINES)
    write_rank(out / "node-x" / "rank-9999.log", SECRET_LINES)
    (out / "job.json").write_text(json.dumps({"job_id": SECRET, "settings": {"secret": SECRET}}))
    make_job(out / "secret-job", nodes=2, fault_lines=tuple(SECRET_LINES))
    return out


@pytest.fixture
def root(tmp_path: Path, outside: Path) -> Path:
    root = tmp_path / "jobs"
    job = make_job(root / "job-0042", nodes=3, fault_node=1)
    (job / "node-001" / "rank-0099.log").symlink_to(outside / "secret.log")  # a rank file
    (job / "node-x").symlink_to(outside / "node-x", target_is_directory=True)  # a node folder
    (root / "job-linked").symlink_to(outside / "secret-job", target_is_directory=True)  # a whole job
    manifest = make_job(root / "job-0043", nodes=2, fault_node=0)
    (manifest / "job.json").unlink()
    (manifest / "job.json").symlink_to(outside / "job.json")
    return root


def _settings(root: Path, tmp_path: Path) -> Settings:
    return Settings(log_root=str(root), cache_dir=str(tmp_path / "cache"))


def test_discover_lists_links_out_of_the_root_and_reads_none(root: Path, outside: Path) -> None:
    spec = discover(root / "job-0042", confine=root)
    assert not any("rank-0099" in f.path or "node-x" in f.path for f in spec.files)
    assert len(spec.files) == 6
    job = root / "job-0042"
    assert sorted(r.split(": ")[0] for r in spec.refused) == [str(job / "node-001" / "rank-0099.log"),
                                                              str(job / "node-x")]
    assert all("link to outside the log root" in r and str(outside) not in r for r in spec.refused)
    unconfined = discover(root / "job-0042")  # a folder given by path on the command line: as before
    assert any("rank-0099" in f.path for f in unconfined.files)


def test_a_job_folder_that_links_out_is_refused(root: Path, tmp_path: Path) -> None:
    with pytest.raises(JobError, match="refused: job 'job-linked' is a link to outside L4_LOG_ROOT"):
        resolve("job-linked", settings=_settings(root, tmp_path))
    with pytest.raises(JobError, match="link to outside the log root"):
        discover(root / "job-linked", confine=root)


def test_triage_never_reads_stores_or_shows_the_secret(root: Path, tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    settings = _settings(root, tmp_path)
    result = triage(TriageRequest(job="job-0042", database_url=f"sqlite:///{db}", settings=settings,
                                  local_paths=False))
    d = result.diagnosis.to_dict()
    assert SECRET not in json.dumps(d)
    listed = d["stats"]["unreadable_files"]
    assert any("rank-0099.log: a link to outside the log root, not read" in f for f in listed)
    assert d["stats"]["files"] == 6
    manifest = triage(TriageRequest(job="job-0043", database_url=f"sqlite:///{db}", settings=settings,
                                    local_paths=False)).diagnosis
    assert manifest.job_id == "job-0043" and SECRET not in json.dumps(manifest.to_dict())
    assert any("job.json: a link to outside" in f for f in manifest.stats.unreadable_files)
    assert SECRET.encode() not in db.read_bytes()


def test_cli_refuses_a_linked_job_id_with_one_line(root: Path, tmp_path: Path) -> None:
    env = {**os.environ, "L4_LOG_ROOT": str(root), "L4_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}",
           "L4_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-m", "bot.cli", "diagnose", "job-linked"], capture_output=True,
                       text=True, env=env, timeout=WAIT, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "refused: job 'job-linked' is a link to outside L4_LOG_ROOT" in r.stderr
    assert SECRET not in r.stdout + r.stderr


def test_the_bot_refuses_in_the_thread_and_posts_no_secret(root: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("L4_LOG_ROOT", str(root))
    monkeypatch.delenv("L4_DATABASE_URL", raising=False)
    with BotHarness(tmp_path, log_root=root, cache_dir=str(tmp_path / "cache")) as bot:
        assert bot.event(message_event("C1", "U1", "job-linked failed")).status == 200
        refusal = bot.wait_update_containing("link to outside L4_LOG_ROOT")
        assert "job-linked" in json.dumps(refusal.params)
        assert bot.event(message_event("C1", "U1", "job-0042 failed too")).status == 200
        bot.wait_summary("job-0042")
        everything = json.dumps([c.params for c in bot.slack.calls])
        assert SECRET not in everything and "hunter2" not in everything
    assert SECRET.encode() not in (tmp_path / "kb.db").read_bytes()


def test_a_link_planted_in_the_cache_is_not_read(tmp_path: Path, outside: Path) -> None:
    from tests.helpers.http_server import HttpServer

    make_job(tmp_path / "www" / "job-7", nodes=3, fault_node=1)
    with HttpServer(folder=tmp_path / "www") as srv:
        settings = Settings(log_root=srv.url("/"), report_hosts=["127.0.0.1"],
                            cache_dir=str(tmp_path / "cache"))
        with resolve("job-7", settings=settings, local_paths=False) as job:
            cached = job.path / "node-001" / "rank-0002.log"
            assert cached.is_file() and job.confine is not None
        cached.unlink()
        cached.symlink_to(outside / "secret.log")  # someone with write access to the cache
        result = triage(TriageRequest(job="job-7", database_url=f"sqlite:///{tmp_path / 'kb.db'}",
                                      settings=settings, local_paths=False))
    d = json.dumps(result.diagnosis.to_dict())
    assert SECRET not in d and result.diagnosis.stats.files == 6  # the link was replaced by the file
    assert not cached.is_symlink() and (outside / "secret.log").read_text().startswith("[rank9]")
    cached.unlink()
    cached.symlink_to(outside / "secret.log")  # planted after the fetch, before the read
    spec = discover(cached.parent.parent, confine=job.confine)
    assert [r.split(": ", 1)[1] for r in spec.refused] == ["a link to outside the log root, not read"]
