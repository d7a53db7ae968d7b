"""Cached job folders under locks: eviction never removes a job being fetched or used (by another
thread or another process), `finish()` leaves others' downloads alone, and concurrent requests for
the same job share one folder without waiting for each other's parsing."""
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bot.resolve import resolve
from bot.sources import logroot
from bot.sources.cache import INDEX, WRITING, JobCache
from bot.sources.fetch import Budget
from bot.sources.locks import LOCKS
from engine.ingest import JobError, discover
from tests.helpers.http_server import HttpServer
from tests.helpers.jobs import gzip_ranks, make_job

REPO = Path(__file__).resolve().parents[3]


def soon(seconds: float = 5.0) -> float:
    return time.monotonic() + seconds


def finished_job(cache: JobCache, url: str, job_id: str, size: int = 2000) -> Path:
    """A complete cached job of `size` bytes, fetched and released."""
    with cache.hold(url, job_id, soon()) as lease:
        assert lease.writing
        job = cache.job(url, job_id)
        job.begin()
        (job.path / "r0.log").write_bytes(b"x" * size)
        job.store("r0.log", url + "r0.log", _entry(size))
        job.finish({"r0.log"})
        lease.written()
        return job.path


def _entry(size: int):
    from bot.sources.cache import Entry
    return Entry(None, None, size, size)


def test_eviction_spares_jobs_being_fetched_and_jobs_in_use(tmp_path: Path) -> None:
    cache = JobCache(tmp_path / "remote-jobs", max_bytes=1)
    old = finished_job(cache, "http://x/old/", "job-old")
    used = finished_job(cache, "http://x/used/", "job-used")
    reading = cache.hold("http://x/used/", "job-used", soon())  # another worker revalidated it...
    assert reading.writing
    reading.written()  # ... and now parses it
    fetching = cache.hold("http://x/new/", "job-new", soon())  # another worker is downloading it
    new = cache.job("http://x/new/", "job-new")
    new.begin()
    (new.path / "node1").mkdir()
    (new.path / "node1" / ".part-abc-r0.log").write_bytes(b"y" * 2000)  # no index yet
    assert cache.evict() == [old]
    assert used.is_dir() and (new.path / "node1" / ".part-abc-r0.log").is_file()
    assert not (cache.root / LOCKS / f"{old.name}.use").exists()  # its lock files went with it
    reading.release()
    fetching.release()
    assert sorted(p.name for p in cache.evict()) == sorted([used.name, new.path.name])
    assert [p.name for p in (cache.root / LOCKS).iterdir()] in ([], [".evict.use"])  # lock files go too


def test_finish_keeps_other_downloads_and_marks_the_job_complete(tmp_path: Path) -> None:
    cache = JobCache(tmp_path / "remote-jobs", max_bytes=1 << 30)
    with cache.hold("http://x/a/", "job-a", soon()) as lease:
        job = cache.job("http://x/a/", "job-a")
        job.begin()
        (job.path / "n0").mkdir()
        (job.path / "n0" / "r0.log").write_text("kept\n")
        (job.path / "n0" / "stale.log").write_text("no longer listed\n")
        (job.path / "n0" / ".part-0123456789ab-r1.log").write_text("someone's download\n")
        assert (job.path / WRITING).exists()
        job.finish({"n0/r0.log"})
        lease.written()
    assert sorted(p.relative_to(job.path).as_posix() for p in job.path.rglob("*") if p.is_file()) == [
        INDEX, "n0/.part-0123456789ab-r1.log", "n0/r0.log"]


def test_a_failed_fetch_is_fetched_again_not_used_half_written(tmp_path: Path) -> None:
    cache = JobCache(tmp_path / "remote-jobs", max_bytes=1 << 30)
    lease = cache.hold("http://x/a/", "job-a", soon())
    cache.job("http://x/a/", "job-a").begin()
    lease.release()  # the fetch failed before finish()
    with cache.hold("http://x/a/", "job-a", soon()) as again:
        assert again.writing


def test_a_fetch_in_progress_is_waited_for_then_used_as_it_is(tmp_path: Path) -> None:
    cache = JobCache(tmp_path / "remote-jobs", max_bytes=1 << 30)
    writer = cache.hold("http://x/a/", "job-a", soon())
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(cache.hold("http://x/a/", "job-a", soon())))
    waiter.start()
    time.sleep(0.3)
    assert waiter.is_alive()  # waits for the download
    job = cache.job("http://x/a/", "job-a")
    job.begin()
    job.finish(set())
    writer.written()
    waiter.join(5)
    assert got and not got[0].writing
    got[0].release()
    writer.release()
    with pytest.raises(JobError, match="job folder job-a-.* is busy"):
        with cache.hold("http://x/a/", "job-a", soon()):  # a fetch that does not finish in time
            cache.hold("http://x/a/", "job-a", soon(0.2)).release()


def test_eviction_respects_a_lease_held_by_another_process(tmp_path: Path) -> None:
    cache = JobCache(tmp_path / "remote-jobs", max_bytes=1)
    folder = finished_job(cache, "http://x/a/", "job-a")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from pathlib import Path; from bot.sources.cache import JobCache\n"
         f"cache = JobCache(Path({str(cache.root)!r}), 1)\n"
         "lease = cache.hold('http://x/a/', 'job-a', time.monotonic() + 5)\n"
         "lease.written(); print('held', lease.writing, flush=True); sys.stdin.readline()"],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held False"
        assert cache.evict() == [] and folder.is_dir()
    finally:
        holder.communicate("\n", timeout=10)
    assert cache.evict() == [folder] and not folder.exists()


def gzip_job(folder: Path) -> Path:
    """A small job whose rank files are all gzip, as a log service stores them."""
    return gzip_ranks(make_job(folder, nodes=2, ranks_per_node=2, fault_node=1))


def test_threads_share_a_job_and_never_evict_one_in_use(tmp_path: Path, make_settings) -> None:
    for name in ("job-a", "job-b"):
        gzip_job(tmp_path / "www" / name)
    with HttpServer(folder=tmp_path / "www") as srv:
        s = make_settings(log_root=srv.url("/"), cache_max_bytes=1)  # every fetch evicts what it can
        leases: list = []
        errors: list = []
        start = threading.Barrier(6)

        def fetch(job_id: str) -> None:
            start.wait()
            try:
                leases.append(logroot.job_from_root(job_id, job_id, s, Budget.from_settings(s)))
            except Exception as exc:  # noqa: BLE001 - collected for the assertion
                errors.append(exc)

        threads = [threading.Thread(target=fetch, args=(f"job-{'ab'[k % 2]}",)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors and len(leases) == 6
        assert sum(lease.writing for lease in leases) == 0  # all written and handed over
        for lease in leases:  # every holder still sees its whole job
            assert len(discover(lease.path).files) == 4
        for lease in leases:
            lease.release()
        # nobody holds anything now: the next fetch may evict the other job
        with logroot.job_from_root("job-a", "job-a", s, Budget.from_settings(s)) as a:
            assert [p.name for p in (tmp_path / "cache" / "remote-jobs").iterdir() if p.name != LOCKS] == [
                a.path.name]


def test_resolve_holds_the_job_until_released(tmp_path: Path, make_settings) -> None:
    for name in ("job-a", "job-b"):
        gzip_job(tmp_path / "www" / name)
    with HttpServer(folder=tmp_path / "www") as srv:
        s = make_settings(log_root=srv.url("/"), cache_max_bytes=1, job_id_pattern=r"job-\w")
        with resolve("job-a", settings=s) as a:
            with resolve("job-b", settings=s) as b:
                assert a.path.is_dir() and b.path.is_dir()
            again = resolve("job-a", settings=s)  # same thread, same job, held: no deadlock
            assert again.path == a.path
            again.release()
        with resolve("job-b", settings=s) as b:
            assert not a.path.exists() and b.path.is_dir()
