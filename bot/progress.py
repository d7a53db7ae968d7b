"""Progress of long ``l4 diagnose`` runs: files and bytes read, on stderr.

On a terminal (and when the output is not JSON) a transient rich bar, gone when the run ends;
otherwise (a pipe, a log file, a CI job) one plain line every few seconds, so that a long run is
never silent. Neither mixes with the diagnosis on stdout.
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


class LineProgress:
    """The same callbacks as DiagnoseProgress, writing one plain line at most every `every` seconds
    (none for a run shorter than that)."""

    def __init__(self, stream: IO[str] | None = None, every: float = 5.0) -> None:
        self._stream = stream
        self._every = every
        self._started = self._last = time.monotonic()

    def _due(self) -> bool:
        now = time.monotonic()
        if now - self._last < self._every:
            return False
        self._last = now
        return True

    def _say(self, text: str) -> None:
        stream = self._stream if self._stream is not None else sys.stderr
        try:
            print(f"l4: {text}", file=stream, flush=True)
        except (OSError, ValueError):  # a closed or broken stderr never stops the run
            pass

    def __call__(self, done: int, total: int, bytes_done: int) -> None:
        if self._due():
            elapsed = max(time.monotonic() - self._started, 1e-6)
            self._say(f"{done}/{total} files read, {decimal(bytes_done)} "
                      f"({decimal(int(bytes_done / elapsed))}/s, {elapsed:.0f} s)")

    def fetched(self, done: int, total: int | None) -> None:
        if self._due():
            self._say(f"downloaded {decimal(done)}" + (f" of {decimal(total)}" if total else ""))

    def close(self) -> None:
        pass


def wants_progress(fmt: str, stream: IO[str] | None = None) -> bool:
    """True when a bar should be drawn: ``stream`` (default stderr) is a terminal, output not JSON."""
    stream = stream if stream is not None else sys.stderr
    try:
        return fmt != "json" and stream.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


def line_seconds() -> float:
    """Seconds between two plain progress lines: ``L4_PROGRESS_SECONDS`` (default 5; a bad value is
    a ConfigError, one line)."""
    from bot.config import _positive

    return _positive("L4_PROGRESS_SECONDS", 5.0, float)


@contextmanager
def diagnose_progress(enabled: bool, console: Console | None = None
                      ) -> Iterator[DiagnoseProgress | LineProgress]:
    """A progress callback for triage/parse: the bar when ``enabled`` (removed on exit), else
    plain lines every ``line_seconds()``."""
    if not enabled:
        yield LineProgress(every=line_seconds())
        return
    bar = DiagnoseProgress(console or Console(stderr=True))
    try:
        yield bar
    finally:
        bar.close()
