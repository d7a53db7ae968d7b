"""The per-file pass: one rank file → counts of pre-keyed lines, first lines, iteration sequences.

A *pre-key* is a raw line with every digit turned into "0" (one `bytes.translate` over a whole
block). Synchronised training repeats the same lines with other numbers, so a job has few distinct
pre-keys; only those go on to masking and Drain (see `parse`). This function is pure and picklable:
an executor maps it over files.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from engine.headers import parse_header
from engine.ingest import RankFile, ReadReport, iter_blocks
from engine.rules import load

_ZERO_DIGITS = bytes.maketrans(b"0123456789", b"0000000000")
SEQ_CAP = 256  # events kept per iteration (consecutive repeats collapse first)
TAIL_LINES = 64  # lines kept from the end of a file to find its last timestamp


@lru_cache(maxsize=1)
def marker_regexes() -> list[re.Pattern[str]]:
    return [re.compile(m["regex"]) for m in load("iterations")["markers"]]


def iteration_of(message: str) -> int | None:
    """The iteration number of an iteration-marker message, else None."""
    for rx in marker_regexes():
        m = rx.search(message)
        if m:
            return int(m.group(1))
    return None


@dataclass
class FileScan:
    path: str
    node: str
    lines: int = 0
    bytes: int = 0
    long_lines_cut: int = 0
    error: str | None = None
    keys: list[bytes] = field(default_factory=list)  # local id -> pre-key
    counts: list[int] = field(default_factory=list)
    first_line: list[bytes] = field(default_factory=list)
    last_line: list[bytes] = field(default_factory=list)
    first_pos: list[int] = field(default_factory=list)
    last_pos: list[int] = field(default_factory=list)
    seqs: list[tuple[int, ...]] = field(default_factory=list)  # distinct per-iteration sequences (local ids)
    iters: list[tuple[int, int]] = field(default_factory=list)  # (iteration, index into seqs)
    first_ts: str | None = None
    last_ts: str | None = None
    truncated_tail: int | None = None  # local id of a last line cut off without a line end
    year: int = 1970


def _is_marker(key: bytes) -> bool:
    msg = parse_header(key.decode("utf-8", "replace")).message
    return iteration_of(msg) is not None


class _Segmenter:
    """Cuts a file's id stream at iteration markers into per-iteration event sequences."""

    def __init__(self, scan: FileScan) -> None:
        self.scan = scan
        self.seq_index: dict[tuple[int, ...], int] = {}
        self.current: int | None = None  # iteration the open segment belongs to
        self.pending: list[np.ndarray] = []
        self.step = 1
        self.prev_marker: int | None = None

    def feed(self, ids: np.ndarray, is_marker: np.ndarray, lines: list[bytes]) -> None:
        pos = np.flatnonzero(is_marker[ids])
        start = 0
        for p in pos.tolist():
            if self.current is not None:
                self.pending.append(ids[start:p])
                self._close()
            number = _marker_number(lines[p])
            if number is None:
                start = p + 1
                continue
            if self.prev_marker is not None and number > self.prev_marker:
                self.step = number - self.prev_marker
            self.prev_marker = number
            self.current = number + self.step
            start = p + 1
        if self.current is not None and start < len(ids):
            self.pending.append(ids[start:])

    def _close(self) -> None:
        seg = (
            np.concatenate(self.pending)
            if len(self.pending) > 1
            else (self.pending[0] if self.pending else np.empty(0, np.int32))
        )
        self.pending = []
        if len(seg):
            seg = seg[np.concatenate(([True], seg[1:] != seg[:-1]))]
        seq = tuple(seg[:SEQ_CAP].tolist())
        idx = self.seq_index.setdefault(seq, len(self.seq_index))
        if idx == len(self.scan.seqs):
            self.scan.seqs.append(seq)
        assert self.current is not None
        self.scan.iters.append((self.current, idx))

    def finish(self) -> None:
        if self.current is not None and self.pending:
            self._close()


def _marker_number(line: bytes) -> int | None:
    # marker regexes are searches, so the header can stay: no header parse on this per-iteration path
    return iteration_of(line.decode("utf-8", "replace"))


def scan_file(rank_file: RankFile) -> FileScan:
    """Scan one rank file (plain, .gz or .zst); never raises for bad content."""
    scan = FileScan(path=rank_file.path, node=rank_file.node)
    try:
        scan.year = time.gmtime(os.stat(rank_file.path).st_mtime).tm_year
    except OSError:
        pass
    report = ReadReport()
    local: dict[bytes, int] = {}
    marker_lut = np.zeros(1024, dtype=bool)
    seg = _Segmenter(scan)
    tail: list[bytes] = []
    pos = 0
    for lines in iter_blocks(rank_file.path, report):
        n = len(lines)
        keys = b"\n".join(lines).translate(_ZERO_DIGITS).split(b"\n")
        counter = Counter(keys)
        new = [k for k in counter if k not in local]
        if new:
            first_idx = dict(zip(reversed(keys), range(n - 1, -1, -1), strict=True))
            for k in new:
                lid = len(local)
                local[k] = lid
                i = first_idx[k]
                scan.keys.append(k)
                scan.counts.append(0)
                scan.first_line.append(lines[i])
                scan.last_line.append(lines[i])
                scan.first_pos.append(pos + i)
                scan.last_pos.append(pos + i)
                if lid >= len(marker_lut):
                    marker_lut = np.concatenate((marker_lut, np.zeros(len(marker_lut), dtype=bool)))
                marker_lut[lid] = _is_marker(k)
        last_idx = dict(zip(keys, range(n), strict=True))
        for k, c in counter.items():
            lid = local[k]
            scan.counts[lid] += c
            scan.last_pos[lid] = pos + last_idx[k]
            scan.last_line[lid] = lines[last_idx[k]]
        has_marker = seg.current is not None or any(marker_lut[local[k]] for k in counter)
        if has_marker:
            ids = np.fromiter(map(local.__getitem__, keys), dtype=np.int32, count=n)
            seg.feed(ids, marker_lut, lines)
        tail = (tail + lines[-TAIL_LINES:])[-TAIL_LINES:]
        if scan.first_ts is None:
            scan.first_ts = _first_ts(lines[:TAIL_LINES], scan.year)
        pos += n
    seg.finish()
    scan.lines = pos
    scan.bytes = report.bytes
    scan.long_lines_cut = report.long_lines_cut
    scan.error = report.error
    if report.truncated_tail and tail:
        scan.truncated_tail = local.get(tail[-1].translate(_ZERO_DIGITS))
    scan.last_ts = _first_ts(reversed(tail), scan.year)
    return scan


def _first_ts(lines, year: int) -> str | None:
    for raw in lines:
        ts = parse_header(raw.decode("utf-8", "replace"), year).ts
        if ts:
            return ts
    return None
