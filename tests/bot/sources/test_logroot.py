"""Log roots: local and file:// folders, HTTP job folders (directory index or job.json) into the
cache with ETag revalidation and eviction, fsspec stores, and report locations kept inside."""
import gzip
import json
import os
from pathlib import Path

import fsspec
import pytest

from bot.sources import logroot
from bot.sources.cache import INDEX
from bot.sources.decompress import BombError
from bot.sources.fetch import Budget
from bot.sources.locks import JobLease
from bot.sources.netguard import Refused
from engine.ingest import JobError, discover
from tests.helpers.http_server import HttpServer
from tests.helpers.jobs import gzip_ranks, make_job


def gzip_job(folder: Path) -> Path:
    """A small job whose rank files are all gzip, as a log service stores them."""
    return gzip_ranks(make_job(folder, nodes=2, ranks_per_node=2, fault_node=1))


def budget(settings) -> Budget:
    return Budget.from_settings(settings)


def released(lease: JobLease) -> Path:
    """The folder of `lease`, let go of at once (as `resolve_job` does)."""
    with lease:
        return lease.path


def test_local_and_file_roots(tmp_path: Path, make_settings) -> None:
    job = make_job(tmp_path / "jobs" / "job-1", nodes=1)
    for root in (str(tmp_path / "jobs"), (tmp_path / "jobs").as_uri()):
        s = make_settings(log_root=root)
        assert released(logroot.job_from_root("job-1", "job-1", s, budget(s))) == job
    with pytest.raises(JobError, match="unknown job 'job-2'"):
        logroot.job_from_root("job-2", "job-2", s, budget(s))


def test_http_root_with_directory_index_and_etag_revalidation(tmp_path: Path, make_settings) -> None:
    gzip_job(tmp_path / "www" / "job-7")
    (tmp_path / "www" / "job-7" / "job.json").unlink()  # no manifest: the index is crawled
    (tmp_path / "www" / "other-job").mkdir()
    (tmp_path / "www" / "other-job" / "secret.log").write_text("not this job's")
    with HttpServer(folder=tmp_path / "www") as srv:
        s = make_settings(log_root=srv.url("/"))
        seen: list[int] = []
        b = Budget.from_settings(s, lambda done, total: seen.append(done))
        local = released(logroot.job_from_root("job-7", "job-7", s, b))
        spec = discover(local)
        assert sorted((Path(f.path).relative_to(local).as_posix(), f.node) for f in spec.files) == [
            ("node-000/rank-0000.log.gz", "node-000"), ("node-000/rank-0001.log.gz", "node-000"),
            ("node-001/rank-0002.log.gz", "node-001"), ("node-001/rank-0003.log.gz", "node-001")]
        assert seen and seen[-1] == b.done
        assert not any("other-job" in r.path for r in srv.seen())
        # again: every file is revalidated with its ETag and answered 304, nothing downloaded twice
        logroot.job_from_root("job-7", "job-7", s, budget(s))
        assert srv.statuses("/job-7/node-000/rank-0000.log.gz") == [200, 304]
        assert srv.seen("/job-7/node-000/rank-0000.log.gz")[1].headers["if-none-match"].startswith('"')
        # a changed file is fetched again; a removed one disappears from the cached job
        www = tmp_path / "www" / "job-7"
        (www / "node-000" / "rank-0000.log.gz").write_bytes(gzip.compress(b"changed\n"))
        (www / "node-001" / "rank-0003.log.gz").unlink()
        local = released(logroot.job_from_root("job-7", "job-7", s, budget(s)))
        assert srv.statuses("/job-7/node-000/rank-0000.log.gz") == [200, 304, 200]
        assert gzip.decompress((local / "node-000" / "rank-0000.log.gz").read_bytes()) == b"changed\n"
        assert not (local / "node-001" / "rank-0003.log.gz").exists()


def test_http_root_with_a_manifest_nodes_map(tmp_path: Path, make_settings) -> None:
    www = tmp_path / "www" / "job-8"
    gzip_job(www)
    manifest = json.loads((www / "job.json").read_text())
    # rank-0000 lies flat in the job folder, the others in their node folders
    (www / "node-000" / "rank-0000.log.gz").rename(www / "rank-0000.log.gz")
    manifest["nodes"] = {"node-000": ["rank-0000.log.gz", "rank-0001.log.gz"],
                         "node-001": ["rank-0002.log.gz", "rank-0003.log.gz"]}
    (www / "job.json").write_text(json.dumps(manifest))
    with HttpServer(folder=tmp_path / "www") as srv:
        s = make_settings(log_root=srv.url("/"))
        local = released(logroot.job_from_root("job-8", "job-8", s, budget(s)))
        assert not any(r.path.endswith("/job-8/") for r in srv.seen())  # no index needed
    spec = discover(local)
    assert {Path(f.path).name: f.node for f in spec.files} == {
        "rank-0000.log.gz": "node-000", "rank-0001.log.gz": "node-000",
        "rank-0002.log.gz": "node-001", "rank-0003.log.gz": "node-001"}
    assert spec.settings == manifest["settings"]


def test_unsafe_manifest_names_are_refused(tmp_path: Path, make_settings) -> None:
    (tmp_path / "www" / "job-9").mkdir(parents=True)
    (tmp_path / "www" / "job-9" / "job.json").write_text(json.dumps({"nodes": {"n": ["../../etc/passwd"]}}))
    with HttpServer(folder=tmp_path / "www") as srv:
        s = make_settings(log_root=srv.url("/"))
        with pytest.raises(JobError, match="names an unsafe file"):
            logroot.job_from_root("job-9", "job-9", s, budget(s))
        with pytest.raises(JobError, match=r"unknown job 'job-404': not found under L4_LOG_ROOT"):
            logroot.job_from_root("job-404", "job-404", s, budget(s))


def test_gzip_bomb_in_a_remote_job_is_stopped_and_not_kept(tmp_path: Path, make_settings) -> None:
    job = tmp_path / "www" / "job-b"
    make_job(job, nodes=1)
    with gzip.open(job / "node-000" / "rank-9.log.gz", "wb", compresslevel=1) as fh:
        for _ in range(40):
            fh.write(bytes(1 << 20))
    with HttpServer(folder=tmp_path / "www") as srv:
        s = make_settings(log_root=srv.url("/"), max_decompress_ratio=50)
        with pytest.raises(BombError, match=r"node-000/rank-9.log.gz expands to more than 50×"):
            logroot.job_from_root("job-b", "job-b", s, budget(s))
    cache = tmp_path / "cache"
    assert not list(cache.rglob("rank-9.log.gz")) and not list(cache.rglob(".part-*"))


def test_cache_size_cap_evicts_the_least_recently_used_job(tmp_path: Path, make_settings) -> None:
    for name in ("job-a", "job-b"):
        gzip_job(tmp_path / "www" / name)
    with HttpServer(folder=tmp_path / "www") as srv:
        s = make_settings(log_root=srv.url("/"))
        first = released(logroot.job_from_root("job-a", "job-a", s, budget(s)))
        size = sum(f.stat().st_size for f in first.rglob("*") if f.is_file())
        os.utime(first / INDEX, (1, 1))  # used long ago
        s = make_settings(log_root=srv.url("/"), cache_max_bytes=int(size * 1.5))
        second = released(logroot.job_from_root("job-b", "job-b", s, budget(s)))
        assert second.is_dir() and not first.exists()
        # a job bigger than the whole cap is still kept while it is the one in use
        s = make_settings(log_root=srv.url("/"), cache_max_bytes=1)
        assert released(logroot.job_from_root("job-b", "job-b", s, budget(s))) == second and second.is_dir()


def test_fsspec_roots(tmp_path: Path, make_settings) -> None:
    src = make_job(tmp_path / "src" / "job-m", nodes=2, fault_node=0)
    fs = fsspec.filesystem("memory")
    for f in src.rglob("*"):
        if f.is_file():
            fs.pipe(f"/logs/{f.relative_to(src.parent).as_posix()}", f.read_bytes())
    try:
        s = make_settings(log_root="memory://logs")
        local = released(logroot.job_from_root("job-m", "job-m", s, budget(s)))
        assert len(discover(local).files) == len(discover(src).files)
        assert discover(local).settings == discover(src).settings
        with pytest.raises(JobError, match="unknown job 'job-x'"):
            logroot.job_from_root("job-x", "job-x", s, budget(s))
    finally:
        fs.rm("/logs", recursive=True)


def test_missing_fsspec_backend_names_the_extra(make_settings) -> None:
    pytest.importorskip("fsspec")
    try:
        import s3fs  # noqa: F401
        pytest.skip("s3fs is installed")
    except ImportError:
        pass
    s = make_settings(log_root="s3://bucket/logs")
    with pytest.raises(JobError, match=r"s3:// log roots needs more packages: install the 's3' extra"):
        logroot.job_from_root("job-1", "job-1", s, budget(s))


def test_report_locations_stay_inside_the_log_root(tmp_path: Path, make_settings) -> None:
    job = make_job(tmp_path / "jobs" / "2026" / "job-5", nodes=1)
    s = make_settings(log_root=str(tmp_path / "jobs"))
    assert released(logroot.job_from_location("2026/job-5", "job-5", s, budget(s))) == job
    assert released(logroot.job_from_location(str(job), "job-5", s, budget(s))).resolve() == job.resolve()
    for outside in ("file:///etc", "/etc", str(tmp_path / "jobs" / ".." / "elsewhere"), "2026/../../x",
                    "s3://bucket/x"):
        with pytest.raises(Refused, match="log location .* is outside L4_LOG_ROOT"):
            logroot.job_from_location(outside, "job-5", s, budget(s))
    with pytest.raises(Refused, match="host evil.example.org is not in L4_REPORT_HOSTS"):
        logroot.job_from_location("http://evil.example.org/logs/job-5/", "job-5", s, budget(s))
