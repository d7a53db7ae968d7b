"""A scan function that kills the Dask worker process running it, once (for the lost-worker test)."""
from __future__ import annotations

import os
from pathlib import Path

from engine.scan import scan_decorated, scan_file


def scan_or_die_once(marker: str, rank_file):  # noqa: ANN001 - a RankFile, or (RankFile, decoration)
    """Kill this worker process (as a crash or the OOM killer would) the first time it is called;
    afterwards scan normally. `marker` is a file that records that the kill happened."""
    flag = Path(marker)
    try:
        fd = os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:  # parse_jobs maps (rank file, its job's decoration) pairs
        return scan_decorated(rank_file) if isinstance(rank_file, tuple) else scan_file(rank_file)
    os.close(fd)
    os._exit(9)
