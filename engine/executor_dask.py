"""An executor on a Dask cluster (`pip install 'l4[dask]'`): rank files are scanned on the workers.

Only the files' paths travel to the workers; each worker opens the files itself (so they must see
the job folder at the same path, e.g. a shared file system or the same mount), scans them with the
same pure function as the local executors, and sends back the per-file result. Results come back
in input order, so a diagnosis is the same as in-process. A worker lost mid-job is Dask's to handle:
the scheduler runs its tasks again elsewhere (each task is also retried `retries` times when it
raises). Dask is imported only when this executor is made.

`analyse_on_worker` is a whole analysis as one task (the bot submits one per request): it runs on a
worker, parses there (a big job's files fanned out over the cluster from that task) and returns the
`engine.job_analysis.JobAnalysis`; nothing is written anywhere.
"""
from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import CancelledError
from typing import Any, TypeVar

from engine.executors import PARALLEL_MIN_BYTES, InProcessExecutor
from engine.ingest import JobError, JobSpec
from engine.job_analysis import JobAnalysis, analyse_job
from engine.known import KnownSignature
from engine.model import ParsedJob
from engine.parse import parse_jobs

T = TypeVar("T")
R = TypeVar("R")


GATHER = 32  # results fetched per round trip, in input order (bounded: the client holds one batch)


class DaskUnavailable(JobError):
    """The cluster cannot be used (dask missing, scheduler unreachable); the text is one line."""


class DaskExecutor:
    """Maps a function over items on the Dask cluster at `address` (`tcp://host:8786`), or on an
    existing `distributed.Client` given as `client`."""

    def __init__(self, address: str | None = None, *, client: Any = None, connect_timeout: float = 10.0,
                 retries: int = 2) -> None:
        self.address = address
        self.retries = retries
        self._own = client is None
        if client is None:
            try:
                from distributed import Client
            except ImportError:
                raise DaskUnavailable("L4_DASK_SCHEDULER is set but dask is not installed "
                                      "(pip install 'l4[dask]')") from None
            try:
                client = Client(address, timeout=connect_timeout, set_as_default=False)
            except (OSError, TimeoutError, ValueError) as exc:
                raise DaskUnavailable(f"Dask scheduler {address} unreachable ({one_line(exc)})") from None
        self.client = client

    @property
    def workers(self) -> int:
        info = self.client.scheduler_info()
        return max(1, sum(w.get("nthreads", 1) for w in info.get("workers", {}).values()))

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        items = list(items)
        if not items:
            return iter(())
        self._check_paths(items)
        run = uuid.uuid4().hex[:12]
        futures = self.client.map(fn, items, key=[f"l4-scan-{run}-{i}" for i in range(len(items))],
                                  pure=False, retries=self.retries)
        return self._results(futures)

    def _check_paths(self, items: list) -> None:
        """Every worker must see the files (items with a `path`) where the client does."""
        path = next((getattr(i, "path", None) for i in items if getattr(i, "path", None)), None)
        if path is None:
            return
        try:
            seen = self.client.run(os.access, path, os.R_OK)
        except (OSError, TimeoutError) as exc:
            raise DaskUnavailable(f"Dask cluster {self.address or ''} failed ({one_line(exc)})") from None
        blind = sorted(w for w, ok in seen.items() if not ok)
        if blind:
            more = f" (and {len(blind) - 1} more workers)" if len(blind) > 1 else ""
            raise DaskUnavailable(f"Dask worker {blind[0]}{more} cannot read {path}: the workers must "
                                  "see the job folder at the same path")

    def _results(self, futures: list) -> Iterator[R]:
        try:
            for at in range(0, len(futures), GATHER):
                try:
                    batch = self.client.gather(futures[at:at + GATHER])
                except (OSError, TimeoutError, CancelledError) as exc:
                    raise DaskUnavailable(f"Dask cluster {self.address or ''} failed mid-job "
                                          f"({one_line(exc)})") from None
                except Exception as exc:
                    if exc.__class__.__name__ != "KilledWorker":
                        raise
                    raise DaskUnavailable(f"Dask workers kept dying on a task ({one_line(exc)})") from None
                yield from batch
        finally:
            self.client.cancel([f for f in futures if not f.done()])

    def close(self) -> None:
        if self._own:
            self.client.close()

    def __enter__(self) -> DaskExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{exc.__class__.__name__}: {text[0][:200]}" if text else exc.__class__.__name__


def analyse_on_worker(job: JobSpec, history: Sequence[JobSpec], pool: Sequence[str],
                      top_nodes: int = 5, *, spread_from: int = PARALLEL_MIN_BYTES,
                      known: Sequence[KnownSignature] = ()) -> JobAnalysis:
    """`analyse_job` as a Dask task. Its files are scanned in this task when the jobs are small;
    from `spread_from` bytes on they are fanned out over the cluster (the task leaves its worker
    thread while it waits, so analyses waiting on scans never hold every thread)."""
    def parse(jobs: list[JobSpec]) -> list[ParsedJob]:
        if sum(f.size for j in jobs for f in j.files) < spread_from:
            return parse_jobs(jobs, executor=InProcessExecutor())
        from distributed import worker_client

        with worker_client() as client:
            return parse_jobs(jobs, executor=DaskExecutor(client=client))
    return analyse_job(job, history, pool, parse=parse, top_nodes=top_nodes, known=known)
