"""A progress bar for long ``l4 diagnose`` runs: files and bytes read, on stderr, with rich.

Shown only when stderr is a terminal and the output is not JSON; it is transient (gone when
the run ends), so it never mixes with the diagnosis on stdout.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from rich.console import Console
from rich.filesize import decimal
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn


class DiagnoseProgress:
    """The engine's progress callback ((files done, files total, bytes done)) drawing a rich bar."""

    def __init__(self, console: Console) -> None:
        self._bar = Progress(
            TextColumn("{task.description}"), BarColumn(),
            TextColumn("{task.fields[count]}"),
            TextColumn("{task.fields[size]}"), TextColumn("{task.fields[speed]}"), TimeElapsedColumn(),
            console=console, transient=True)
        self._task: TaskID | None = None
        self._fetch: TaskID | None = None
        self._started = 0.0

    def __call__(self, done: int, total: int, bytes_done: int) -> None:
        if self._task is None:
            self._started = time.monotonic()
            if self._fetch is None:
                self._bar.start()
            else:  # show the download's final size, then the files
                self._bar.refresh()
                self._bar.remove_task(self._fetch)
            self._task = self._bar.add_task("Reading logs", total=max(total, 1), count="", size="", speed="")
        elapsed = max(time.monotonic() - self._started, 1e-6)
        description = "Analysing" if done >= total else "Reading logs"
        self._bar.update(self._task, completed=done, total=max(total, 1), description=description,
                         count=f"{done}/{total} files", size=decimal(bytes_done),
                         speed=f"{decimal(int(bytes_done / elapsed))}/s")

    def fetched(self, done: int, total: int | None) -> None:
        """Bytes of remote logs downloaded so far (before parsing starts)."""
        if self._fetch is None:
            self._bar.start()
            self._fetch = self._bar.add_task("Downloading logs", total=total, count="", size="", speed="")
        size = decimal(done) + (f" of {decimal(total)}" if total else "")
        self._bar.update(self._fetch, completed=done, total=total, size=size)

    def close(self) -> None:
        if self._task is not None or self._fetch is not None:
            self._bar.stop()


def wants_progress(fmt: str, stream: IO[str] | None = None) -> bool:
    """True when a bar should be drawn: ``stream`` (default stderr) is a terminal, output not JSON."""
    stream = stream if stream is not None else sys.stderr
    try:
        return fmt != "json" and stream.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


@contextmanager
def diagnose_progress(enabled: bool, console: Console | None = None) -> Iterator[DiagnoseProgress | None]:
    """A progress callback for triage/parse (None when not ``enabled``); the bar is removed on exit."""
    if not enabled:
        yield None
        return
    bar = DiagnoseProgress(console or Console(stderr=True))
    try:
        yield bar
    finally:
        bar.close()
