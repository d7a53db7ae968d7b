"""The lines of one rank file around one line: what the failing rank was doing when it failed.

Only the failing rank's file is read again, and only up to a little past the failure, keeping
BEFORE lines before it and AFTER lines after it (line numbers as `scan` counts them).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
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


def read_windows_before(path: str, anchors: Iterable[int], before: int) -> dict[int, Window]:
    """For each line number of `anchors`, the lines of `path` from `anchor - before` to the anchor, read in
    one pass up to the last anchor (`read_window` reads the file from its start for each); an anchor past the
    file's end, or a file that cannot be read, has no window."""
    want = sorted(set(anchors))
    out: dict[int, Window] = {}
    if not want:
        return out
    keep: deque[bytes] = deque(maxlen=before + 1)
    pos, k = 0, 0
    for block in iter_chunks(path, ReadReport()):
        lines = block.lines()
        while k < len(want) and want[k] < pos + len(lines):
            anchor = want[k]
            upto = lines[max(0, anchor - pos - before): anchor - pos + 1]
            held = (list(keep) + upto)[-(before + 1):]
            out[anchor] = Window(path=path, anchor=anchor, start=anchor + 1 - len(held),
                                 lines=[b.decode("utf-8", "replace") for b in held])
            k += 1
        if k == len(want):
            break
        keep.extend(lines)
        pos += len(lines)
    return out
