"""`l4 bench speed --executor dask`: parsing a job on a Dask cluster with 1 and 2 workers, and what a
bigger cluster would give.

Each worker count gets a fresh `LocalCluster` of single-threaded worker processes on this machine (or
the cluster at `scheduler`, once). Figures: wall time and MB/s of `parse_jobs` through the
`DaskExecutor`. The per-file scan costs measured on the workers give the scaling model: a cluster of
W workers needs about `client + LPT makespan of the file costs on W workers` (the client merges the
per-file results one after the other; no worker can finish before its largest file). Both terms
are CPU seconds (the client's: its process, scheduler thread included, while it parses; the files':
on the workers), so the model is that of dedicated cores however loaded this machine is when it
runs. It is an estimate: it leaves out the network and storage a real cluster reads over.
"""
from __future__ import annotations

import functools
import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from engine.executor_dask import DaskExecutor
from engine.ingest import discover
from engine.parse import parse_jobs

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class DaskRow:
    workers: int
    seconds: float
    mb_per_s: float
    estimated: bool = False
    client_cpu: float = 0.0  # CPU seconds of the client process (scheduler thread included)
    worker_cpu: float = 0.0  # CPU seconds of the scans on the workers


def timed_call(fn: Callable[[T], R], item: T) -> tuple[R, float]:
    """`fn(item)` on a worker, and the CPU seconds it took there."""
    t0 = time.process_time()
    out = fn(item)
    return out, time.process_time() - t0


class _TimingExecutor(DaskExecutor):
    """Collects each file's CPU time on the workers (over every step `parse_jobs` maps: the head pass and
    the scan) while parsing as usual."""

    costs: list[float]

    def map(self, fn, items):  # noqa: ANN001, ANN201 - the Executor protocol
        items = list(items)
        if not getattr(self, "costs", None) or len(self.costs) != len(items):
            self.costs = [0.0] * len(items)
        for i, (out, secs) in enumerate(super().map(functools.partial(timed_call, fn), items)):
            self.costs[i] += secs
            yield out


def _warm() -> None:
    """Import the scan's modules on a worker before timing (a fixed cost per worker process)."""
    import engine.parse  # noqa: F401
    import engine.scan  # noqa: F401


def makespan(costs: list[float], workers: int) -> float:
    """Longest-processing-time-first schedule of `costs` on `workers`: its finishing time."""
    loads = [0.0] * workers
    heapq.heapify(loads)
    for c in sorted(costs, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + c)
    return max(loads)


def run_dask_speed(job: Path, counts: tuple[int, ...] = (1, 2), *, scheduler: str | None = None,
                   model: tuple[int, ...] = (16,)) -> list[DaskRow]:
    import logging

    from distributed import Client, LocalCluster

    logging.getLogger("distributed").setLevel(logging.WARNING)  # its INFO lines are not the table

    size = sum(f.size for f in discover(job).files)
    rows: list[DaskRow] = []
    costs: list[float] = []
    client_secs = 0.0
    for n in counts if scheduler is None else (0,):
        cluster = None if scheduler else LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                                      dashboard_address=None, host="127.0.0.1",
                                                      silence_logs=40)
        client = Client(scheduler or cluster, set_as_default=False)
        try:
            client.run(_warm)
            ex = _TimingExecutor(client=client)
            workers = ex.workers
            t0, c0 = time.perf_counter(), time.process_time()
            parse_jobs([job], executor=ex)
            secs, client_cpu = time.perf_counter() - t0, time.process_time() - c0
            if not costs:
                costs = list(ex.costs)
                client_secs = client_cpu
            rows.append(DaskRow(workers, secs, size / 1e6 / secs, client_cpu=client_cpu,
                                worker_cpu=sum(ex.costs)))
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    for w in model:
        est = client_secs + makespan(costs, w)
        rows.append(DaskRow(w, est, size / 1e6 / est, estimated=True, client_cpu=client_secs,
                            worker_cpu=sum(costs)))
    return rows


def format_dask_speed(rows: list[DaskRow], size: int) -> str:
    out = [f"Parsing {size / 1e9:.2f} GB on Dask (single-threaded worker processes, imports warmed):", "",
           "| workers | seconds | MB/s | client CPU s | worker CPU s | |", "|---|---|---|---|---|---|"]
    for r in rows:
        note = ("estimate: client CPU + longest worker's share of the per-file CPU costs" if r.estimated
                else "measured (wall clock)")
        out.append(f"| {r.workers} | {r.seconds:.1f} | {r.mb_per_s:.0f} | {r.client_cpu:.1f} | "
                   f"{r.worker_cpu:.1f} | {note} |")
    return "\n".join(out)
