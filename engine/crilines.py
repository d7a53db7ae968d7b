"""Kubernetes container log files (the CRI format of containerd and CRI-O): long lines put back together.

A container runtime writes each line of a container's output as `<RFC 3339 stamp> <stream> <tag> <text>`;
a line longer than its buffer (16 KiB in containerd and CRI-O) is written as several records, every one
but the last tagged `P` (partial) and the last `F` (full). Read record by record, one Python traceback
line or one JSON record of 40 KiB would be three lines, two of them cut in the middle of a word, and a
root-cause line split in two shows neither half as the message. `CriJoiner` joins each run of `P`
records with the record that ends it into one line that keeps the first record's stamp, stream and tag,
streaming over the blocks of lines `engine.ingest.iter_chunks` reads (a run may cross blocks). A run
longer than `max_line` keeps its first `max_line` bytes (counted as a cut line, as over-long lines
are); a run that never ends (the writer died) is kept as it is at the end of the file or where a line
of another shape breaks it. A file is read as CRI when its first line is a CRI record (a kubelet's file
holds nothing else); any other file passes through untouched, at no cost per block.
"""

from __future__ import annotations

import re

# stamp, stream and tag of a CRI record; group 1 is the tag, the text starts at the match's end
_RECORD = re.compile(rb"\d{4}-\d\d-\d\d[Tt][\d:.]+(?:[Zz]|[+-]\d\d:?\d\d) (?:stdout|stderr) ([PF]) ?")
_PARTIAL = (b"stdout P", b"stderr P")


class CriJoiner:
    """Joins partial CRI records across the blocks of one file (whole lines joined by b"\\n")."""

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self.cut = 0  # joined lines kept to their first max_line bytes
        self._pending: list[bytes] = []  # the run's first record, then the texts of the ones after it
        self._size = 0
        self._full = False  # the run reached max_line: later parts are dropped
        self._cri: bool | None = None  # the file's first line is a CRI record (decided on the first block)

    def join(self, body: bytes) -> bytes | None:
        """`body` with its partial runs joined; a run still open at its end is held back for the next
        block (None when nothing of `body` is left to emit)."""
        if self._cri is None:
            self._cri = _RECORD.match(body) is not None
        if not self._cri or (not self._pending and not any(p in body for p in _PARTIAL)):
            return body
        out: list[bytes] = []
        for line in body.split(b"\n"):
            m = _RECORD.match(line)
            if m is None:
                if self._pending:
                    out.append(self._flush())
                out.append(line)
                continue
            partial = m.group(1) == b"P"
            if self._pending:
                self._add(line[m.end():])
                if not partial:
                    out.append(self._flush())
            elif partial:
                self._start(line)
            else:
                out.append(line)
        return b"\n".join(out) if out else None

    def finish(self) -> bytes | None:
        """The run still open at the end of the file, if any."""
        return self._flush() if self._pending else None

    def _start(self, line: bytes) -> None:
        self._pending, self._size, self._full = [], 0, False
        self._add(line)

    def _add(self, text: bytes) -> None:
        if self._full:
            return
        room = self.max_line - self._size
        if len(text) > room:
            text, self._full = text[:room], True
            self.cut += 1
        self._pending.append(text)
        self._size += len(text)

    def _flush(self) -> bytes:
        line = b"".join(self._pending)
        self._pending, self._size, self._full = [], 0, False
        return line
