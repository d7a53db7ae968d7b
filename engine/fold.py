"""Folding of whole variable tokens: the grouping key of a line, computed per block at C speed.

A token is a run of ASCII letters, digits and non-ASCII bytes. It is *variable*, and becomes
"<*>", when it starts with a digit (numbers, `0x…` hex, hashes, `12ms`), is all hex with a digit
and long (`deadbeef01…`), or holds many digit runs (random names such as `tmpa8f3k2ls`); hex
tokens joined to a variable one by `:` or `-` fold with it (UUIDs, IPv6). Paths (two or more
`/part` steps, as masking.yaml's `path` rule) fold whole: their parts are often random.
Identifiers keep their digits (`c10d`, `EXT4-fs`, `bf16`), and so do short numbers glued to one
(`mlx5_0`, `cuda:0`).
A line with control bytes is *binary*: its key is BINARY_KEY and it is counted, not templated.
The thresholds live in engine/data/masking.yaml (`fold:`). engine/_fold.c does the work; the
Python version below gives the same result where the extension could not be built.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from engine import freetext
from engine.rules import load

try:
    from engine import _fold as _c
except ImportError:  # built without a C compiler
    _c = None

PLACEHOLDER = b"<*>"
BINARY_KEY = b"\x00"


@lru_cache(maxsize=1)
def rules() -> tuple[int, int, int, int]:
    f = load("masking")["fold"]
    return (int(f["keep_after_underscore"]), int(f["keep_after_colon"]), int(f["hex_min"]),
            int(f["random_digit_runs"]))


def fold_block(data: bytes) -> bytes:
    """`data` (lines joined by b"\\n") with every line's variable tokens folded; lines stay aligned."""
    if _c is not None:
        return _c.fold(data, *rules())
    return b"\n".join(_fold_line(line) for line in data.split(b"\n"))


def fold_block_values(data: bytes, width: int) -> tuple[bytes, np.ndarray]:
    """`fold_block(data)` and, per line, the values of its first `width` variable tokens that are
    all digits (-1 for the others): a (lines, width) int64 array, read in the same pass."""
    if _c is not None:
        keys, vals = _c.fold(data, *rules(), width)
        return keys, np.frombuffer(vals, dtype=np.int64).reshape(-1, width)
    lines = data.split(b"\n")
    out = np.full((len(lines), width), -1, dtype=np.int64)
    for row, line in enumerate(lines):
        for k, (a, b) in enumerate((_py_spans(line, *rules()) or [])[:width]):
            if b - a <= 18 and line[a:b].isdigit() and line[a:b].isascii():
                out[row, k] = int(line[a:b])
    return b"\n".join(_fold_line(ln) for ln in lines), out


class FreeText:
    """The free-text regime's state of one file (see engine/freetext.py)."""

    def __init__(self) -> None:
        self.rules = freetext.rules()
        self.state: bytearray | freetext.PyState = (  # zeroed: no regime, nothing counted
            bytearray(_c.FREE_STATE_SIZE) if _c is not None else freetext.PyState())


def key_ids(folded: bytes, table: dict[bytes, int], room: int, free: FreeText | None = None
            ) -> tuple[np.ndarray, list[int], list[bytes]]:
    """The id in `table` of every line of `folded`; a line new to it is added with the next id
    (len(table)) while fewer than `room` were added, and listed (line indexes, keys); further new
    lines get -1. With `free` (kept per file), a new pre-key of a file in the free-text regime
    gets a free key instead (engine/freetext.py)."""
    if _c is not None:
        if free is None:
            raw, fresh_lines, fresh_keys = _c.keys(folded, table, room)
        else:
            raw, fresh_lines, fresh_keys = _c.keys(folded, table, room, free.state, free.rules)
        return np.frombuffer(raw, dtype=np.int64), fresh_lines, fresh_keys
    if free is not None:
        assert isinstance(free.state, freetext.PyState)
        got, fresh_lines, fresh_keys = freetext.py_keys(folded, table, room, free.state, free.rules)
        return np.array(got, dtype=np.int64), fresh_lines, fresh_keys
    lines = folded.split(b"\n")
    ids = np.empty(len(lines), dtype=np.int64)
    fresh_lines: list[int] = []
    fresh_keys: list[bytes] = []
    for row, key in enumerate(lines):
        lid = table.get(key)
        if lid is None and len(fresh_keys) < room:
            lid = table[key] = len(table)
            fresh_lines.append(row)
            fresh_keys.append(key)
        ids[row] = -1 if lid is None else lid
    return ids, fresh_lines, fresh_keys


def line_starts(data: bytes) -> tuple[np.ndarray, int]:
    """Where each line of `data` (lines joined by b"\\n") starts, with one entry more than there are
    lines (len(data) + 1), and the length of its longest line."""
    if _c is not None:
        raw, longest = _c.starts(data)
        return np.frombuffer(raw, dtype=np.int64), longest
    nl = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    starts = np.empty(len(nl) + 2, dtype=np.int64)
    starts[0] = 0
    starts[1:-1] = nl + 1
    starts[-1] = len(data) + 1
    return starts, int(np.diff(starts).max()) - 1


def fold_text(text: str) -> str:
    """One message folded (what a template shows for the tokens its key folded)."""
    return fold_block(text.encode("utf-8", "surrogateescape")).decode("utf-8", "replace")


def spans(line: bytes) -> list[tuple[int, int]] | None:
    """(start, end) of the variable tokens of `line`, None if it is binary."""
    if _c is not None:
        return _c.spans(line, *rules())
    return _py_spans(line, *rules())


def numbers(data: bytes, starts: np.ndarray, ends: np.ndarray, index: np.ndarray) -> np.ndarray:
    """The value of variable token `index[i]` of line data[starts[i]:ends[i]]; -1 where that token
    is not all digits (at most 18)."""
    starts, ends, index = (np.ascontiguousarray(a, dtype=np.int64) for a in (starts, ends, index))
    if _c is not None:
        return np.frombuffer(_c.numbers(data, starts, ends, index, *rules()), dtype=np.int64)
    out = np.full(len(starts), -1, dtype=np.int64)
    for i, (a, b, j) in enumerate(zip(starts.tolist(), ends.tolist(), index.tolist(), strict=True)):
        sp = _py_spans(data[a:b], *rules()) or []
        if 0 <= j < len(sp):
            tok = data[a + sp[j][0]:a + sp[j][1]]
            if len(tok) <= 18 and tok.isdigit():
                out[i] = int(tok)
    return out


# ----------------------------------------------------------------------------- the Python twin

_DIGIT, _HEXL, _LETTER, _SEP, _CTRL = 1, 2, 3, 0, 4


def _classes() -> bytes:
    cls = bytearray(256)
    for c in range(256):
        if 48 <= c <= 57:
            cls[c] = _DIGIT
        elif chr(c) in "abcdefABCDEF":
            cls[c] = _HEXL
        elif (chr(c).isascii() and chr(c).isalpha()) or c >= 0x80:
            cls[c] = _LETTER
        elif (c < 0x20 and c not in (9, 10, 13, 0x1B, 12, 11)) or c == 0x7F:
            cls[c] = _CTRL
    return bytes(cls)


_CLS = _classes()


def _py_spans(s: bytes, keep_us: int, keep_colon: int, hex_min: int, random_runs: int
              ) -> list[tuple[int, int]] | None:
    out: list[tuple[int, int]] = []
    n, i = len(s), 0
    prev: tuple[int, int] | None = None
    chain: list[tuple[int, int]] = []  # kept hex groups joined to each other, up to `prev`
    prev_folded = prev_group = chain_digit = False
    cls = s.translate(_CLS)
    if 4 in cls:
        return None
    while i < n:
        if cls[i] == _SEP:
            e = _path_end(s, i) if s[i] in b"/." else -1
            if e > 0:
                out.append((i, e))
                i, prev, chain = e, None, []
            else:
                i += 1
            continue
        a = i
        digits = others = runs = 0
        in_run = False
        while i < n and cls[i] != _SEP:
            d = cls[i]
            if d == _DIGIT:
                digits += 1
                runs += not in_run
                in_run = True
            else:
                in_run = False
                others += d == _LETTER
            i += 1
        b, length = i, i - a
        hexdig = digits > 0 and others == 0
        group = others == 0 and (digits > 0 or length <= 4 or length >= hex_min)  # UUID/IPv6 group
        var = False
        if cls[a] == _DIGIT:
            var = True
            if digits == length and a >= 2 and _CLS[s[a - 2]] in (_DIGIT, _HEXL, _LETTER):
                next_ok = b >= n or s[b] not in b".:,"
                if s[a - 1] == 0x5F and length <= keep_us:
                    var = False
                elif s[a - 1] == 0x3A and length <= keep_colon and next_ok:
                    var = False
        elif (hexdig and length >= hex_min) or runs >= random_runs:
            var = True
        joined = prev is not None and a - prev[1] <= 2 and not s[prev[1]:a].strip(b":-")
        cont = joined and prev_group and not prev_folded and bool(chain)
        if not var and group and ((joined and prev_folded) or
                                  (cont and len(chain) >= 2 and (digits > 0 or chain_digit))):
            var = True
        if var and cont:
            out.extend(chain)
        if var:
            out.append((a, b))
        if var or not group:
            chain = []
        elif cont:
            chain.append((a, b))
            chain_digit = chain_digit or digits > 0
        else:
            chain, chain_digit = [(a, b)], digits > 0
        prev, prev_folded, prev_group = (a, b), var, group
    return out


_PATH_CHARS = frozenset(b"_.@,+=-") | {c for c in range(256) if _CLS[c] in (_DIGIT, _HEXL, _LETTER)}


def _path_end(s: bytes, i: int) -> int:
    if i > 0 and (_CLS[s[i - 1]] in (_DIGIT, _HEXL, _LETTER) or s[i - 1] in b"_<>"):
        return -1
    p, steps, n = i, 0, len(s)
    while True:
        q = p
        while q < n and q - p < 2 and s[q] == 0x2E:
            q += 1
        if q >= n or s[q] != 0x2F:
            break
        q += 1
        while q < n and s[q] in _PATH_CHARS:
            q += 1
        steps, p = steps + 1, q
    return p if steps >= 2 else -1


def _fold_line(line: bytes) -> bytes:
    sp = _py_spans(line, *rules())
    if sp is None:
        return BINARY_KEY
    parts, p = [], 0
    for a, b in sp:
        parts += [line[p:a], PLACEHOLDER]
        p = b
    parts.append(line[p:])
    return b"".join(parts)
