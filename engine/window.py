"""The lines of one rank file around one line: what the failing rank was doing when it failed.

Only the failing rank's file is read again, and only up to a little past the failure, keeping
BEFORE lines before it and AFTER lines after it (line numbers as `scan` counts them).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from engine.ingest import ReadReport, iter_chunks

BEFORE = 5000
AFTER = 200


@dataclass
class Window:
    path: str
    anchor: int  # the failure's line number in the file
    start: int = 0  # line number of lines[0]
    lines: list[str] = field(default_factory=list)

    @property
    def at(self) -> int:
        """Index of the anchor line in `lines` (len(lines) when the file ended before it)."""
        return self.anchor - self.start


def read_window(path: str, anchor: int, before: int = BEFORE, after: int = AFTER) -> Window | None:
    """The lines of `path` from `anchor - before` to `anchor + after`; None when it cannot be read."""
    keep: deque[bytes] = deque(maxlen=before + after + 1)
    pos = 0
    stop = anchor + after + 1
    report = ReadReport()
    for block in iter_chunks(path, report):
        lines = block.lines()
        if pos + len(lines) > stop:
            lines = lines[: max(0, stop - pos)]
        keep.extend(lines)
        pos += len(lines)
        if pos >= stop:
            break
    if not keep and report.error:
        return None
    start = pos - len(keep)
    return Window(path=path, anchor=anchor, start=start,
                  lines=[b.decode("utf-8", "replace") for b in keep])
