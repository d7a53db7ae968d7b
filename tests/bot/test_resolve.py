"""resolve() and `l4 diagnose` with failure-report links, end to end against a real HTTP server on
127.0.0.1 (allowlisted here), and the refusals a pasted link can meet."""
import gzip
import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from bot.config import Settings
from bot.resolve import ResolvedJob, resolve, resolve_job
from bot.sources.netguard import Refused
from engine.ingest import JobError
from tests.helpers.http_server import HttpServer
from tests.helpers.jobs import make_job, publish_gz
from tests.helpers.wait import WAIT

SCHEMA = json.loads(resources.files("engine").joinpath("data", "diagnosis.v1.schema.json").read_text())
REPORT = {
    "job_id": "job-0042",
    "description": "Training stopped at iteration 20: CUDA ECC error on node-002",
    "settings": {"model": "toy", "framework": "megatron"},
    "log_url": "/logs/job-0042/",
    "owner": "ana",
}


def settings_for(tmp_path: Path, srv: HttpServer, **overrides) -> Settings:
    values = dict(log_root=srv.url("/logs/"), report_hosts=["127.0.0.1"], cache_dir=str(tmp_path / "cache"),
                  fetch_timeout=1.0, fetch_time_limit=20.0)
    values.update(overrides)
    return Settings(**values)


def run_l4(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    full = {**os.environ, "L4_DATABASE_URL": "sqlite://", **env}
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], capture_output=True, text=True, env=full,
                          timeout=WAIT)


def test_folder_and_job_id_refs(tmp_path: Path) -> None:
    job = make_job(tmp_path / "jobs" / "job-1", nodes=1)
    s = Settings(log_root=str(tmp_path / "jobs"))
    assert resolve(str(job), settings=s) == ResolvedJob(job, "job-1", None)
    assert resolve(" job-1 ", settings=s).path == job
    with pytest.raises(JobError, match="no such job folder: ../etc/passwd"):
        resolve("../etc/passwd", settings=s)
    for ref in ("file:///etc", "FILE://localhost/etc/passwd", "gopher://x/", "s3://bucket/job-1"):
        with pytest.raises(Refused, match=r"^refused: \w+:// links are not fetched"):
            resolve(ref, settings=s)
    with pytest.raises(JobError, match="no job given"):
        resolve("  ", settings=s)


def test_remote_log_root_needs_the_job_id_pattern(tmp_path: Path) -> None:
    s = Settings(log_root="http://127.0.0.1:9/logs/", report_hosts=["127.0.0.1"], job_id_pattern=r"job-\d+")
    with pytest.raises(JobError, match="does not match L4_JOB_ID_PATTERN"):
        resolve("anything", settings=s)


def test_report_link_resolves_to_its_logs_on_the_same_server(tmp_path: Path, monkeypatch) -> None:
    publish_gz(tmp_path / "www")
    with HttpServer(folder=tmp_path / "www") as srv:
        srv.route("/reports/42", body=json.dumps(REPORT).encode(), content_type="application/json")
        progress: list[int] = []
        got = resolve(srv.url("/reports/42?session=s3cret"), settings=settings_for(tmp_path, srv),
                      progress=lambda done, total: progress.append(done))
        monkeypatch.setenv("L4_LOG_ROOT", str(tmp_path / "nowhere"))
        assert resolve_job(str(got.path)) == got.path  # the thin wrapper still takes folders
    assert got.job_id == "job-0042" and (got.path / "node-002" / "rank-0004.log.gz").is_file()
    assert got.report == {"url": srv.url("/reports/42?…"), "job_id": "job-0042",
                          "description": REPORT["description"], "settings": REPORT["settings"],
                          "log_location": srv.url("/logs/job-0042/"), "owner": "ana"}
    assert "s3cret" not in json.dumps(got.report) and progress and progress == sorted(progress)


def test_report_without_location_uses_the_log_root(tmp_path: Path) -> None:
    publish_gz(tmp_path / "www", "job-0043")
    with HttpServer(folder=tmp_path / "www") as srv:
        srv.route("/r/43", body=b'<html><body><h1>Failure</h1><p>job-0043 died</p></body></html>',
                  content_type="text/html")
        got = resolve(srv.url("/r/43"), settings=settings_for(tmp_path, srv))
    assert got.job_id == "job-0043" and got.path.is_dir()
    assert got.report == {"url": srv.url("/r/43"), "job_id": "job-0043"}


def test_l4_diagnose_a_report_link_end_to_end(tmp_path: Path) -> None:
    publish_gz(tmp_path / "www")
    with HttpServer(folder=tmp_path / "www") as srv:
        srv.route("/reports/42", body=json.dumps(REPORT).encode(), content_type="application/json")
        env = {"L4_REPORT_HOSTS": "127.0.0.1", "L4_LOG_ROOT": srv.url("/logs/"),
               "L4_CACHE_DIR": str(tmp_path / "cache")}
        r = run_l4("diagnose", srv.url("/reports/42"), "--format", "json", "--no-match", env=env)
        assert r.returncode == 0, r.stderr
        d = json.loads(r.stdout)
        jsonschema.validate(d, SCHEMA)
        assert d["job_id"] == "job-0042" and d["nodes"][0]["node"] == "node-002"
        assert d["report"]["description"] == REPORT["description"]
        assert d["report"]["settings"] == REPORT["settings"]
        r = run_l4("diagnose", srv.url("/reports/42"), "--no-match", env=env)
        assert r.returncode == 0, r.stderr
        assert f"Failure report: {srv.url('/reports/42')}" in r.stdout and REPORT["description"] in r.stdout


def test_refusals_are_one_safe_line(tmp_path: Path) -> None:
    job = tmp_path / "www" / "logs" / "job-bomb"
    make_job(job, nodes=1)
    with gzip.open(job / "node-000" / "rank-9.log.gz", "wb", compresslevel=1) as fh:
        for _ in range(40):
            fh.write(bytes(1 << 20))
    with HttpServer(folder=tmp_path / "www") as srv:
        srv.route("/r/private", status=302, headers={"Location": "http://10.0.0.1/report"})
        srv.route("/r/logs-elsewhere", body=b'{"job_id": "job-1", "log_url": "file:///etc/"}',
                  content_type="application/json")
        srv.route("/r/traversal", body=b'{"job_id": "../../etc"}', content_type="application/json")
        srv.route("/r/bomb", body=b'{"job_id": "job-bomb"}', content_type="application/json")
        srv.route("/r/slow", body=b"{}", delay=2.0)
        s = settings_for(tmp_path, srv, fetch_timeout=0.3, max_decompress_ratio=50)
        cases = [
            ("https://evil.example.org/report/1?token=xoxb-secret",
             "refused: host evil.example.org is not in L4_REPORT_HOSTS"),
            ("http://169.254.169.254/latest/meta-data/",
             "refused: host 169.254.169.254 is not in L4_REPORT_HOSTS"),
            ("file:///etc/passwd", "refused: file:// links are not fetched"),
            (srv.url("/r/private"), "refused: host 10.0.0.1 is not in L4_REPORT_HOSTS"),
            (srv.url("/r/logs-elsewhere"),
             "refused: the report's log location file:///etc/ is outside L4_LOG_ROOT"),
            (srv.url("/r/traversal"), "not a valid job ID: ../../etc"),
            (srv.url("/r/bomb"),
             "refused: node-000/rank-9.log.gz expands to more than 50× its compressed size "
             "(decompression bomb?)"),
            (srv.url("/r/slow"), f"timed out fetching {srv.url('/r/slow')} (L4_FETCH_TIMEOUT 0.3 s)"),
        ]
        for ref, message in cases:
            with pytest.raises(JobError) as info:
                resolve(ref, settings=s)
            assert str(info.value).startswith(message) and "\n" not in str(info.value), (ref, str(info.value))
            assert "xoxb-secret" not in str(info.value)


def test_l4_diagnose_refusal_exits_2_with_one_line(tmp_path: Path) -> None:
    r = run_l4("diagnose", "http://169.254.169.254/latest/meta-data/iam?token=xoxb-secret",
               env={"L4_REPORT_HOSTS": "reports.example.com", "L4_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 2 and r.stderr == "l4: refused: host 169.254.169.254 is not in L4_REPORT_HOSTS\n"
