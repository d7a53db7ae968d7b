"""Turning what a user typed (a folder, a job ID, a failure-report link) into a job folder on disk.

`resolve()` is the one entry point, used by the triage service for the CLI and the bot. The
parts (validation, guarded fetching, the cache, report documents, log roots) are in `bot.sources`.

A job fetched into the cache is held (`ResolvedJob` is a context manager): until it is released,
no other request rewrites it and the cache's eviction, in any thread or process, leaves it alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bot.config import Settings
from bot.sources import logroot
from bot.sources.fetch import Budget
from bot.sources.jobids import is_safe_job_id, matches_pattern, shorten, validate_job_id
from bot.sources.locks import JobLease
from bot.sources.netguard import Refused, safe_url
from bot.sources.reports import fetch_report
from engine.ingest import JobError

JOB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")  # kept for importers; see jobids


@dataclass
class ResolvedJob:
    """A job folder, held while in use: `with resolve(ref) as job: parse(job.path)`, or `release()`."""

    path: Path  # a local job folder the engine can read
    job_id: str
    report: dict | None = None  # what the failure report said (url, description, settings...), JSON-safe
    lease: JobLease | None = field(default=None, compare=False, repr=False)  # a cached folder's hold
    # the log root or cache the folder lies in: the engine reads nothing whose links lead outside
    # it (None for a folder given by path on the command line)
    confine: Path | None = None

    def release(self) -> None:
        """Done reading the folder: the cache may evict or refresh it from now on (idempotent)."""
        if self.lease is not None:
            self.lease.release()

    def __enter__(self) -> ResolvedJob:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def log_root() -> Path:
    """L4_LOG_ROOT as a local path (for a local or file:// root)."""
    return logroot.local_base(Settings.from_env().log_root)


def resolve(
    ref: str,
    *,
    settings: Settings | None = None,
    progress: Callable[[int, int | None], None] | None = None,
    local_paths: bool = True,
) -> ResolvedJob:
    """The job `ref` names: an existing local folder, a job ID under L4_LOG_ROOT, or an http(s)
    failure-report link. Remote logs are downloaded into the cache; `progress(done, total)` is
    called with bytes received (total None when unknown). Raises JobError (one safe line).
    Release the result (`with resolve(...) as job:`) once the job is parsed.

    With `local_paths=False` (the bot: `ref` is text from chat), a folder path is never taken as
    given: only job IDs under the log root and report links resolve."""
    settings = settings or Settings.from_env()
    ref = ref.strip()
    if not ref:
        raise JobError("no job given")
    budget = Budget.from_settings(settings, progress)
    if "://" in ref:
        scheme = ref.split("://", 1)[0].lower()
        if scheme not in ("http", "https"):
            raise Refused(f"refused: {shorten(scheme, 20)}:// links are not fetched; give a job ID, a job "
                          "folder or an http(s) failure-report link")
        report = fetch_report(ref, settings, budget)
        job_id = validate_job_id(report.job_id or "")
        if report.log_location:
            if scheme == "https" and report.log_location.lower().startswith("http://"):
                raise Refused("refused: the https failure report points to logs over plain http "
                              f"({safe_url(report.log_location)}); serve them over https")
            lease = logroot.job_from_location(report.log_location, job_id, settings, budget)
        else:
            lease = logroot.job_from_root(job_id, job_id, settings, budget)
        return ResolvedJob(path=lease.path, job_id=job_id, report=report.to_dict(), lease=lease,
                           confine=lease.confine)
    path = Path(ref)
    if local_paths and path.is_dir():
        return ResolvedJob(path=path, job_id=path.name)
    if local_paths and path.exists():
        raise JobError(f"not a job folder: {shorten(ref)}")
    if not is_safe_job_id(ref):
        raise JobError(f"no such job folder: {shorten(ref)} (nor a job ID: letters, digits, '.', '_', '-'; "
                       "no '/' or '..')")
    if logroot.root_kind(settings.log_root) != "local" and not matches_pattern(ref, settings.job_id_pattern):
        raise JobError(f"not a job ID: {shorten(ref)} does not match L4_JOB_ID_PATTERN, and no such folder")
    lease = logroot.job_from_root(ref, ref, settings, budget)
    return ResolvedJob(path=lease.path, job_id=ref, lease=lease, confine=lease.confine)


def resolve_job(ref: str) -> Path:
    """A job folder for `ref` (see `resolve`), not held: a cached one may be evicted later by
    another request. Raises JobError."""
    with resolve(ref) as job:
        return job.path
