"""The per-file pass: one rank file → counts of pre-keyed lines, first lines, iteration sequences.

A *pre-key* is a raw line with its whole variable tokens (numbers, hex, UUIDs, IPs, hashes…)
folded into "<*>" (`fold.fold_block`, one C pass over a whole block). Synchronised training
repeats the same lines with other values, so a job has few distinct pre-keys; only those go on
to masking and Drain (see `parse`). This function is pure and picklable: an executor maps it
over files.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from engine.decoration import Decoration, JobEvidence, decide, learn, needs_head, sample_size
from engine.fold import FreeText, fold_block, fold_block_values, key_ids, numbers, spans
from engine.freetext import FREE
from engine.headers import may_hold_record, parse_header, timestamp
from engine.ingest import CHUNK, Chunk, RankFile, ReadReport, iter_chunks
from engine.iterruns import Run, RunBuilder
from engine.logstacks import FaulthandlerReader
from engine.rules import load

SEQ_CAP = 256  # events kept per iteration (consecutive repeats collapse first)
TAIL_LINES = 64  # lines kept from the end of a file to find its last timestamp
MAX_DIGITS = 18  # longer iteration numbers do not fit an int64
KEY_CAP = 50_000  # distinct pre-keys kept per file; beyond it lines are grouped by a coarse key
COARSE_PREFIX = 48  # bytes of the pre-key a coarse key keeps (cut back to a space)
COARSE = b"\x01"  # coarse keys start with it (see `coarse_key`)
VALUE_WIDTH = 16  # numbers read with the fold per line: those of its first variable tokens


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


_ZERO_DIGITS = str.maketrans("123456789", "000000000")
HEADER_MEMO = 1 << 16  # header shapes remembered (lines with digits as "0")


@lru_cache(maxsize=HEADER_MEMO)
def _header_shape(zeroed: str) -> tuple[int, str | None]:
    header = parse_header(zeroed)
    return len(header.message), header.level


_ASCII_DIGIT = re.compile(rb"[0-9]")


def may_hold_number(line: bytes) -> bool:
    """False when `line` can hold neither an iteration number nor a timestamp: it is ASCII and has
    no digit (free text). Marker numbers are read as ASCII digits; other lines are kept (True)."""
    return _ASCII_DIGIT.search(line) is not None or not line.isascii()


def message_level(text: str, decoration: Decoration | None = None) -> tuple[str, str | None]:
    """`parse_header(text, decoration=decoration)`'s message and level, the header parsed once per
    shape: the prefix and level rules treat every digit alike, so lines that differ only in digits
    (`[rank9]:` and `[rank12]:`, other values) strip the same header (not so a structured line's: it
    is parsed itself). Per distinct pre-key, not per line. `decoration`: the line's file's
    (`engine.decoration`), stripped first."""
    if decoration is not None:
        text = decoration.strip(text)
    if may_hold_record(text):  # a structured line's message is no suffix of it (engine.jsonlog)
        header = parse_header(text)
        return header.message, header.level
    size, level = _header_shape(text.translate(_ZERO_DIGITS))
    end = len(text.rstrip())
    return text[end - size:end], level


@dataclass
class FileScan:
    path: str
    node: str
    lines: int = 0
    bytes: int = 0
    long_lines_cut: int = 0
    error: str | None = None
    binary: bool = False  # the file does not start like text (engine.ingest.looks_binary)
    keys: list[bytes] = field(default_factory=list)  # local id -> pre-key
    counts: list[int] = field(default_factory=list)
    first_line: list[bytes] = field(default_factory=list)
    last_line: list[bytes] = field(default_factory=list)
    first_pos: list[int] = field(default_factory=list)
    last_pos: list[int] = field(default_factory=list)
    seqs: list[tuple[int, ...]] = field(default_factory=list)  # distinct per-iteration sequences (local ids)
    runs: list[Run] = field(default_factory=list)  # iterations as runs over seqs (see `iterruns`)
    first_ts: str | None = None
    last_ts: str | None = None
    truncated_tail: int | None = None  # local id of a last line cut off without a line end
    year: int = 1970
    decoration: Decoration | None = None  # what every line of the file carries (engine.decoration)
    fault_frames: list[str] = field(default_factory=list)  # its last faulthandler dump's main thread


BY_REGEX = -2  # a marker whose number sits inside a kept word or a folded path ("global_step13")


def _marker_token(line: bytes, decoration: Decoration | None = None) -> int | None:
    """Which variable token of `line` is its iteration number (its index among the folded tokens),
    if the line is an iteration marker. Every line of a pre-key has its variable tokens in the
    same places, so the number is read from that token of each line, without a regex per line;
    BY_REGEX when the number is part of a bigger token (such lines are rare: checkpoint saves)."""
    if _ASCII_DIGIT.search(line) is None:  # the number is read as ASCII digits (below)
        return None
    text = line.decode("utf-8", "replace")
    if iteration_of(message_level(text, decoration)[0]) is None:
        return None
    char = _str_span(text)
    if char is None:
        return None
    if line.isascii():
        a, b = char
    else:
        try:  # character offsets → byte offsets, exact when the line is valid UTF-8
            strict = line.decode("utf-8")
        except UnicodeDecodeError:
            return None
        a = len(strict[:char[0]].encode("utf-8"))
        b = a + len(strict[char[0]:char[1]].encode("utf-8"))
    if not 0 < b - a <= MAX_DIGITS or not line[a:b].isdigit():
        return None  # only ASCII digits are read
    try:
        return (spans(line) or []).index((a, b))
    except ValueError:
        return BY_REGEX


def _regex_number(line: bytes) -> int:
    """The iteration number of a BY_REGEX marker line (-1 if it has none)."""
    text = line.decode("utf-8", "replace")
    char = _str_span(text)
    digits = text[char[0]:char[1]] if char is not None else ""
    return int(digits) if digits.isascii() and digits.isdigit() and len(digits) <= MAX_DIGITS else -1


def _str_span(text: str) -> tuple[int, int] | None:
    """(start, end) of the iteration number in `text`, by the first marker regex that finds one."""
    for rx in marker_regexes():
        m = rx.search(text)
        if m:
            return m.start(1), m.end(1)
    return None


def coarse_key(key: bytes) -> bytes:
    """The key of a line once its file holds KEY_CAP distinct pre-keys: the start of its pre-key
    (whole words); once KEY_CAP coarse keys crowd the table too, COARSE alone. Memory and time
    stay bounded for files whose lines never repeat (free text that folding cannot group)."""
    head = key[:COARSE_PREFIX]
    cut = head.rfind(b" ") if len(key) > COARSE_PREFIX else -1
    return COARSE + (head[:cut] if cut > 0 else head)


class _KeyTable:
    """A file's distinct pre-keys (local ids in order of first appearance) and their statistics."""

    def __init__(self, scan: FileScan) -> None:
        self.scan = scan
        self.local: dict[bytes, int] = {}
        self.counts = np.zeros(64, dtype=np.int64)
        self.first_pos = np.zeros(64, dtype=np.int64)
        self.last_pos = np.zeros(64, dtype=np.int64)
        self.marker_tok = np.full(64, -1, dtype=np.int64)  # -1: no marker (see _marker_token)
        self.free = FreeText()  # where nothing repeats, new pre-keys are grouped (engine/freetext.py)

    def ids(self, folded: bytes, chunk: Chunk, pos: int) -> np.ndarray:
        """Local ids of the lines of `folded` (the pre-keys of `chunk`, whose first line is line `pos`
        of the file), new pre-keys numbered by first appearance."""
        base = len(self.local)
        ids, fresh_lines, fresh_keys = key_ids(folded, self.local, max(0, KEY_CAP - base), self.free)
        self._record(fresh_lines, fresh_keys, chunk, pos, base)
        if len(self.local) >= KEY_CAP and (ids < 0).any():  # crowded: the rest is grouped coarsely
            ids = ids.copy()
            over = np.flatnonzero(ids < 0).tolist()
            lines = folded.split(b"\n")
            coarse = self._coarsen([lines[i] for i in over])
            base, new_lines, new_keys = len(self.local), [], []
            for i, c in zip(over, coarse, strict=True):
                lid = self.local.get(c)
                if lid is None:
                    lid = self.local[c] = len(self.local)
                    new_lines.append(i)
                    new_keys.append(c)
                ids[i] = lid
            self._record(new_lines, new_keys, chunk, pos, base)
        return ids

    def _record(self, lines: list[int], keys: list[bytes], chunk: Chunk, pos: int, base: int) -> None:
        """The first lines of new pre-keys `keys` (local ids from `base` on), at `lines` of `chunk`."""
        if not keys:
            return
        self._grow(len(self.local))
        sc = self.scan
        for r, (i, key) in enumerate(zip(lines, keys, strict=True)):
            lid = base + r
            line = chunk.line(i)
            sc.keys.append(key)
            sc.first_line.append(line)
            sc.last_line.append(line)
            self.first_pos[lid] = pos + i
            tok = (_marker_token(line, sc.decoration)  # mixed layouts
                   if not key.startswith((COARSE, FREE)) else None)
            if tok is not None:
                self.marker_tok[lid] = tok

    def _coarsen(self, keys: list[bytes]) -> list[bytes]:
        """The coarse keys of `keys` (lines whose pre-keys did not fit in the table any more)."""
        room_coarse = 2 * KEY_CAP - max(len(self.local), KEY_CAP)  # then only COARSE itself
        coarse: dict[bytes, bytes] = {}
        made: set[bytes] = set()
        for k in dict.fromkeys(keys):
            c = coarse_key(k)
            if c not in self.local and c not in made:
                if len(made) >= room_coarse - 1:
                    c = COARSE
                made.add(c)
            coarse[k] = c
        return [coarse[k] for k in keys]

    def _grow(self, size: int) -> None:
        if size <= len(self.counts):
            return
        new = max(size, 2 * len(self.counts))
        for name in ("counts", "first_pos", "last_pos", "marker_tok"):
            old = getattr(self, name)
            arr = np.full(new, -1 if name == "marker_tok" else 0, dtype=old.dtype)
            arr[: len(old)] = old
            setattr(self, name, arr)

    def count(self, ids: np.ndarray, chunk: Chunk, pos: int) -> None:
        """Counts and last appearances of the ids of one chunk."""
        n = len(ids)
        self.counts[: len(self.local)] += np.bincount(ids, minlength=len(self.local))
        rev_u, rev_first = np.unique(ids[::-1], return_index=True)
        last = n - 1 - rev_first
        self.last_pos[rev_u] = pos + last
        last_line = self.scan.last_line
        for lid, i in zip(rev_u.tolist(), last.tolist(), strict=True):
            last_line[lid] = chunk.line(i)

    def marker_numbers(self, ids: np.ndarray, at: np.ndarray, chunk: Chunk, values: np.ndarray
                       ) -> np.ndarray:
        """The iteration numbers of the marker lines `at` of `chunk` (-1: that line's token is no
        number), mostly from `values` (see `fold_block_values`)."""
        if not len(at):
            return np.zeros(0, dtype=np.int64)
        tok = self.marker_tok[ids[at]]
        vals = values[at, np.clip(tok, 0, VALUE_WIDTH - 1)]
        far = np.flatnonzero(tok >= VALUE_WIDTH)
        if len(far):
            vals[far] = numbers(chunk.data, chunk.starts[at[far]], chunk.starts[at[far] + 1] - 1, tok[far])
        odd = np.flatnonzero(tok == BY_REGEX)
        if len(odd):
            vals[odd] = [_regex_number(chunk.line(i)) for i in at[odd].tolist()]
        return vals

    def finish(self) -> None:
        n = len(self.local)
        sc = self.scan
        sc.counts = self.counts[:n].tolist()
        sc.first_pos = self.first_pos[:n].tolist()
        sc.last_pos = self.last_pos[:n].tolist()


class _Segmenter:
    """Cuts a file's id stream at iteration markers into per-iteration event sequences.

    The lines after marker N (up to the next marker) are iteration N + step, step being the last
    increase between marker numbers. Consecutive repeats collapse; a sequence keeps SEQ_CAP events.
    Whole chunks are cut at once; only distinct sequences become tuples.
    """

    def __init__(self) -> None:
        self.seq_index: dict[tuple[int, ...], int] = {}
        self.seqs: list[tuple[int, ...]] = []
        self.runs = RunBuilder()
        self.current: int | None = None  # iteration the open segment belongs to
        self.step = 1
        self.prev_marker: int | None = None
        self.open: list[int] = []  # the open segment, collapsed and capped
        self.open_lines = False  # the open segment has at least one line

    def _index(self, seq: tuple[int, ...]) -> int:
        idx = self.seq_index.get(seq)
        if idx is None:
            idx = self.seq_index[seq] = len(self.seqs)
            self.seqs.append(seq)
        return idx

    def _extend_open(self, seg: np.ndarray) -> None:
        if not len(seg):
            return
        self.open_lines = True
        room = SEQ_CAP - len(self.open)
        if room <= 0:
            return
        keep = np.empty(len(seg), dtype=bool)
        keep[0] = not self.open or self.open[-1] != seg[0]
        keep[1:] = seg[1:] != seg[:-1]
        self.open.extend(seg[keep][:room].tolist())

    def _take_open(self) -> int:
        idx = self._index(tuple(self.open))
        self.open, self.open_lines = [], False
        return idx

    def feed(self, ids: np.ndarray, is_marker: np.ndarray, at: np.ndarray, nums: np.ndarray) -> None:
        """One chunk: its ids, which lines are markers, the marker positions and their numbers."""
        if not len(at):
            if self.current is not None:
                self._extend_open(ids)
            return
        its: list[int] = []
        idx: list[int] = []
        if self.current is not None:
            self._extend_open(ids[: at[0]])
            its.append(self.current)
            idx.append(self._take_open())
        k = len(at)
        diff = np.empty(k, dtype=np.int64)
        diff[1:] = nums[1:] - nums[:-1]
        diff[0] = nums[0] - self.prev_marker if self.prev_marker is not None else 0
        last_up = np.maximum.accumulate(np.where(diff > 0, np.arange(k), -1))
        steps = np.where(last_up >= 0, diff[np.maximum(last_up, 0)], self.step)
        current = nums + steps
        mid_its = current[:-1]
        mid_idx = self._middle(ids, is_marker, at)
        self.runs.extend(np.concatenate((np.array(its, dtype=np.int64), mid_its)),
                         np.concatenate((np.array(idx, dtype=np.int64), mid_idx)))
        self.prev_marker = int(nums[-1])
        self.step = int(steps[-1])
        self.current = int(current[-1])
        self.open, self.open_lines = [], False
        self._extend_open(ids[at[-1] + 1:])

    def _middle(self, ids: np.ndarray, is_marker: np.ndarray, at: np.ndarray) -> np.ndarray:
        """Sequence indexes of the segments between consecutive markers of one chunk."""
        m = len(at) - 1
        if m <= 0:
            return np.empty(0, dtype=np.int64)
        if not (np.diff(at) > 1).any():  # back-to-back markers: every segment is empty
            return np.full(m, self._index(()), dtype=np.int64)
        lo, hi = int(at[0]) + 1, int(at[-1])
        r_ids, r_mk = ids[lo:hi], is_marker[lo:hi]
        keep = ~r_mk
        keep[1:] &= (r_ids[1:] != r_ids[:-1]) | r_mk[:-1]
        seg_of = np.cumsum(r_mk)
        kp = np.flatnonzero(keep)
        kseg = seg_of[kp]
        rank = np.arange(len(kp)) - np.searchsorted(kseg, kseg, side="left")
        capped = rank < SEQ_CAP
        kp, kseg, rank = kp[capped], kseg[capped], rank[capped]
        vals = r_ids[kp].astype(np.uint64) + np.uint64(1)
        bounds = np.searchsorted(kseg, np.arange(m + 1), side="left")
        sig = np.empty((m, 3), dtype=np.uint64)
        for col, mult in enumerate(_HASH_MULTS):
            cs = np.zeros(len(kp) + 1, dtype=np.uint64)
            np.cumsum(vals * mult[rank], out=cs[1:])
            sig[:, col] = cs[bounds[1:]] - cs[bounds[:-1]]
        sig[:, 2] = (bounds[1:] - bounds[:-1]).astype(np.uint64)
        _, first, inverse = np.unique(sig, axis=0, return_index=True, return_inverse=True)
        distinct = np.array([self._index(tuple(r_ids[kp[bounds[j]:bounds[j + 1]]].tolist()))
                             for j in first.tolist()], dtype=np.int64)
        return distinct[inverse.reshape(-1)]

    def finish(self) -> None:
        if self.current is not None and self.open_lines:
            self.runs.add(self.current, self._take_open())


def _hash_mults() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0x14)
    return tuple(rng.integers(1, 2**63, size=SEQ_CAP, dtype=np.uint64) | np.uint64(1) for _ in range(2))


_HASH_MULTS = _hash_mults()


HEAD_BYTES = 256 * 1024  # what `head_lines` reads of a file's start
HEAD_PROBE = 32 * 1024  # read first: most files' sample of lines ends well before (at most MAX_LINE)


def head_lines(rank_file: RankFile) -> list[str]:
    """The first lines of a file (at most `decoration.sample_size()`, from its first HEAD_BYTES), the
    evidence its line decoration is learned from (`engine.decoration`). The first HEAD_PROBE bytes are
    read first; they give the same lines whenever they hold the whole sample or the whole file."""
    n = sample_size()
    report = ReadReport()
    probe = _first_block(rank_file.path, report, HEAD_PROBE)
    if probe is None and report.error is None:
        return []  # an empty file
    # the probe's lines end before HEAD_PROBE (a whole line, never cut) unless no line ended in it
    if probe is not None and len(probe.data) < HEAD_PROBE and report.error is None \
            and (len(probe) >= n or report.bytes < HEAD_PROBE):
        block = probe  # the sample's lines, or the whole file (it ends before HEAD_PROBE)
    else:
        block = _first_block(rank_file.path, ReadReport(), HEAD_BYTES)
    if block is None:
        return []
    return [ln.decode("utf-8", "replace") for ln in block.data.split(b"\n", n)[:n]]


def _first_block(path: str, report: ReadReport, size: int) -> Chunk | None:
    chunks = iter_chunks(path, report, size)
    try:
        return next(chunks, None)
    finally:
        chunks.close()


def head_decoration(rank_file: RankFile) -> Decoration | None:
    """The decoration a file shows on its own (`decoration.learn` of its `head_lines`): the first of the
    two steps `engine.parse` maps over a job's files (picklable, for executors)."""
    return learn(head_lines(rank_file))


def scan_planned(item: tuple[RankFile, Decoration | None, JobEvidence]) -> FileScan:
    """`scan_file` of a rank file that shows decoration `mine` on its own, in a job that shows
    `job` (the second step, picklable): its decoration is decided for the job first
    (`decoration.decide`, which reads its first lines again only when other files have a prefix
    and it has none)."""
    rank_file, mine, job = item
    head = head_lines(rank_file) if needs_head(mine, job) else []
    return scan_file(rank_file, decoration=decide(mine, head, job), decided=True)


def scan_file(rank_file: RankFile, chunk: int = CHUNK, *, decoration: Decoration | None = None,
              decided: bool = False) -> FileScan:
    """Scan one rank file (plain, .gz or .zst), `chunk` bytes at a time; never raises for bad content.
    `decided`: its lines carry `decoration` (learned over its job, `engine.decoration.learn_job`);
    otherwise it is learned from the file's own first lines."""
    scan = FileScan(path=rank_file.path, node=rank_file.node, decoration=decoration if decided else None)
    try:
        scan.year = time.gmtime(os.stat(rank_file.path).st_mtime).tm_year
    except OSError:
        pass
    report = ReadReport()
    table = _KeyTable(scan)
    seg = _Segmenter()
    tail: list[bytes] = []
    pos = 0
    dumps = FaulthandlerReader()
    for block in iter_chunks(rank_file.path, report, chunk):
        dumps.feed(block.data)
        if pos == 0 and not decided:
            scan.decoration = _learn_decoration(block)
        folded, values = fold_block_values(block.data, VALUE_WIDTH)
        ids = table.ids(folded, block, pos)
        n = len(ids)
        table.count(ids, block, pos)
        is_marker = (table.marker_tok != -1)[ids]
        at = np.flatnonzero(is_marker)
        nums = table.marker_numbers(ids, at, block, values)
        if (nums < 0).any():  # the token is not a number on these lines ("12ms" folds like "12")
            is_marker[at[nums < 0]] = False
            at, nums = at[nums >= 0], nums[nums >= 0]
        if len(at) or seg.current is not None:
            seg.feed(ids, is_marker, at, nums)
        tail = (tail + [block.line(i) for i in range(max(0, n - TAIL_LINES), n)])[-TAIL_LINES:]
        if scan.first_ts is None:
            scan.first_ts = _first_ts((block.line(i) for i in range(min(n, TAIL_LINES))), scan.year,
                                      scan.decoration)
        pos += n
    seg.finish()
    table.finish()
    scan.seqs = seg.seqs
    scan.runs = seg.runs.runs
    scan.lines = pos
    scan.fault_frames = dumps.frames()
    scan.bytes = report.bytes
    scan.long_lines_cut = report.long_lines_cut
    scan.error = report.error
    scan.binary = report.binary
    if report.truncated_tail and tail:
        scan.truncated_tail = table.local.get(fold_block(tail[-1]))
    scan.last_ts = _first_ts(reversed(tail), scan.year, scan.decoration)
    return scan


def _learn_decoration(block: Chunk) -> Decoration | None:
    """The decoration of the file that starts with `block` (its first lines, see `engine.decoration`)."""
    n = min(len(block), sample_size())
    return learn([block.line(i).decode("utf-8", "replace") for i in range(n)])


def _first_ts(lines: Iterable[bytes], year: int, decoration: Decoration | None = None) -> str | None:
    for raw in lines:
        ts = timestamp(raw.decode("utf-8", "replace"), year, decoration=decoration)
        if ts:
            return ts
    return None
