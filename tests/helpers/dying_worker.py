"""A task wrapper that kills the Dask worker process running it, once (for the lost-worker tests)."""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def call_or_die_once(marker: str, fn: Callable[[T], R], item: T) -> R:
    """Kill this worker process (as a crash or the OOM killer would) the first time it is called;
    afterwards return `fn(item)`, whatever the executor maps (`engine.parse` maps two steps over a
    job's files). `marker` is a file that records that the kill happened."""
    try:
        fd = os.open(Path(marker), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return fn(item)
    os.close(fd)
    os._exit(9)
