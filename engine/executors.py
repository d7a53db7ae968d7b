"""Executors map the per-file parsing function over a job's files: in-process or a process pool.

Any object with `map(fn, items) -> iterator of results in order` works (a Dask client wrapper can).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")

PARALLEL_MIN_BYTES = 64 * 1024 * 1024  # below this a pool's start-up costs more than it saves


class Executor(Protocol):
    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]: ...


class InProcessExecutor:
    """Runs everything in the calling process, one file after the other."""

    workers = 1

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        return map(fn, items)


class PoolExecutor:
    """A process pool, one worker per core by default; results come back in input order."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or os.cpu_count() or 1

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        with ProcessPoolExecutor(max_workers=self.workers) as pool:
            yield from pool.map(fn, items, chunksize=1)


def choose_executor(total_bytes: int, files: int, workers: int | None = None) -> Executor:
    """A pool when the job is big enough and there are several files and cores, else in-process."""
    if workers == 1:
        return InProcessExecutor()
    cores = workers or os.cpu_count() or 1
    if cores > 1 and files > 1 and total_bytes >= PARALLEL_MIN_BYTES:
        return PoolExecutor(cores)
    return InProcessExecutor()
