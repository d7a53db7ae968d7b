"""Executors map the per-file parsing function over a job's files: in-process or a process pool.

Any object with `map(fn, items) -> iterator of results in order` works (a Dask client wrapper can).

The pool's workers ignore SIGINT (Ctrl-C reaches the whole process group; the parent alone decides)
and die with their parent: on Linux the kernel sends them SIGKILL when it dies (PR_SET_PDEATHSIG),
elsewhere a watchdog thread in each worker notices. When the parent is interrupted, `map` (or
`stop_all_pools`, for an interrupt that lands elsewhere) cancels the queued files and terminates
the workers instead of joining them: a worker blocked writing a large result into a pipe nobody
reads any more would otherwise hang the shutdown.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, wait
from typing import Protocol, TypeVar

from engine.interrupts import SIGNAL_POLL_SECONDS, interrupts_held, release_in_child

T = TypeVar("T")
R = TypeVar("R")

PARALLEL_MIN_BYTES = 64 * 1024 * 1024  # below this a pool's start-up costs more than it saves
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
WATCHDOG_SECONDS = 0.5  # how often a worker without PR_SET_PDEATHSIG checks on its parent
TERMINATE_GRACE = 2.0  # seconds a terminated worker gets before SIGKILL


class Executor(Protocol):
    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]: ...


class InProcessExecutor:
    """Runs everything in the calling process, one file after the other."""

    workers = 1

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        return map(fn, items)


def _die_with_parent() -> bool:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux); False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(WATCHDOG_SECONDS)
        try:
            os.kill(parent, 0)
        except (ProcessLookupError, PermissionError):  # gone (or its pid reused by someone else)
            os._exit(1)


def _worker_init(parent: int) -> None:
    """Runs first in every worker: ignore Ctrl-C, and die with the process that made the pool."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a handler inherited from the CLI would print a trace
    release_in_child()  # forked inside the parent's `interrupts_held`
    direct = os.getppid() == parent
    if not (direct and _die_with_parent()):  # a fork server's child, or not Linux
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="l4-parent-watch").start()
    if direct and os.getppid() != parent:  # the parent died before the death signal was armed
        os._exit(1)


_live_pools: set[ProcessPoolExecutor] = set()
_live_lock = threading.Lock()


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what is queued and terminate the workers (no join on a worker stuck in a pipe)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + TERMINATE_GRACE
    for p in processes:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(1.0)
    with _live_lock:
        _live_pools.discard(pool)


def stop_all_pools() -> None:
    """Terminate the workers of every pool still running in this process (on an interrupt)."""
    with _live_lock:
        pools = list(_live_pools)
    for pool in pools:
        _stop(pool)


class PoolExecutor:
    """A process pool, one worker per core by default; results come back in input order."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or os.cpu_count() or 1

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        pool = ProcessPoolExecutor(max_workers=self.workers, initializer=_worker_init,
                                   initargs=(os.getpid(),))
        with _live_lock:
            _live_pools.add(pool)
        try:
            with interrupts_held():  # every item is submitted at once: the forks are here
                futures = [pool.submit(fn, item) for item in items]
            for future in futures:
                while not wait([future], timeout=SIGNAL_POLL_SECONDS).done:
                    pass  # a timed wait (engine.interrupts): a SIGTERM or SIGINT the kernel hands to the
                    # pool's management thread acts at once, not after the file in hand is parsed
                yield future.result()
        except BaseException:  # KeyboardInterrupt, SystemExit, GeneratorExit, a worker's error
            _stop(pool)
            raise
        pool.shutdown(wait=True)
        with _live_lock:
            _live_pools.discard(pool)


def choose_executor(total_bytes: int, files: int, workers: int | None = None) -> Executor:
    """A pool when the job is big enough and there are several files and cores, else in-process."""
    if workers == 1:
        return InProcessExecutor()
    cores = workers or os.cpu_count() or 1
    if cores > 1 and files > 1 and total_bytes >= PARALLEL_MIN_BYTES:
        return PoolExecutor(cores)
    return InProcessExecutor()
