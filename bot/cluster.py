"""Where rank files are scanned: this machine (the engine picks in-process or a process pool), or a
Dask cluster when `L4_DASK_SCHEDULER` / `l4 diagnose --dask ADDRESS` names one.

With `L4_DASK_FALLBACK=local`, a cluster that cannot be used (dask not installed, scheduler
unreachable, workers that cannot read the job, workers dying mid-job) is reported in one warning
line and the job is parsed on this machine instead; without it, that is the job's one-line error.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from engine.executor_dask import DaskExecutor, DaskUnavailable
from engine.ingest import JobSpec
from engine.model import ParsedJob
from engine.parse import Progress, parse_jobs

log = logging.getLogger("l4.cluster")


def parse_on_cluster(jobs: Sequence[JobSpec | Path | str], *, scheduler: str | None, fallback: str | None,
                     progress: Progress | None = None, connect_timeout: float = 10.0) -> list[ParsedJob]:
    """`parse_jobs(jobs)` on the Dask cluster at `scheduler` (this machine when it is None)."""
    if not scheduler:
        return parse_jobs(jobs, progress=progress)
    try:
        with DaskExecutor(scheduler, connect_timeout=connect_timeout) as executor:
            return parse_jobs(jobs, executor=executor, progress=progress)
    except DaskUnavailable as exc:
        if fallback != "local":
            raise
        log.warning("%s; parsing on this machine instead (L4_DASK_FALLBACK=local)", exc)
        return parse_jobs(jobs, progress=progress)
