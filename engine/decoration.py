"""A file's line decoration: what (nearly) every line of a file carries that is no part of its message.

A log pasted into an issue thread is often a markdown quote (`> 2023-03-22 09:32:52 iter 3010: …`),
copied from an editor with its line-number gutter (`  12 | …`), from a table (`| … |`), or collected
with a tag every line of the file repeats (`[trainer0|0]:…`, `web_1  | …`); a terminal capture
keeps its colour codes. The header rules (`engine.headers`) would read such a line's decoration as
its message, so its timestamp, level and launcher prefix go unseen and its template keeps the
decoration. The decoration is learned per file from the lines of its start (`learn`), by the shapes
of `decorations` in `engine/data/headers.yaml`: a shape is the file's decoration when at least a
share of its non-blank lines match it. It is stripped before the header rules; the lines keep their
raw text for display.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from engine.rules import compiled, load


@dataclass(frozen=True)
class Decoration:
    """How a file's lines are decorated: regexes (sources) removed from every line that has them."""

    anywhere: str | None = None  # removed wherever it matches (colour codes)
    prefix: str | None = None  # removed at the line's start
    suffix: str | None = None  # removed at the line's end
    name: str = ""  # the shape(s) it was learned from

    def strip(self, line: str) -> str:
        """`line` without its decoration (unchanged where it has none)."""
        if self.anywhere is not None:
            line = compiled(self.anywhere).sub("", line)
        if self.prefix is not None:
            m = compiled(self.prefix).match(line)
            if m is not None and m.end():
                line = line[m.end():]
        if self.suffix is not None:
            m = compiled(self.suffix).search(line)
            if m is not None:
                line = line[:m.start()]
        return line


@dataclass(frozen=True)
class _Shape:
    name: str
    rx: re.Pattern[str]
    increasing: bool = False
    constant: bool = False
    suffix: str | None = None


@lru_cache(maxsize=1)
def _data() -> tuple[int, float, int, list[tuple[str, str]], list[_Shape]]:
    d = load("headers")["decorations"]
    anywhere = [(a["name"], a["regex"]) for a in d.get("anywhere", [])]
    shapes = [_Shape(p["name"], re.compile(p["regex"]), bool(p.get("increasing")), bool(p.get("constant")),
                     p.get("suffix")) for p in d.get("prefixes", [])]
    return int(d["sample"]), float(d["share"]), int(d["min_lines"]), anywhere, shapes


def sample_size() -> int:
    """How many lines of a file's start `learn` reads."""
    return _data()[0]


def learn(lines: Sequence[str]) -> Decoration | None:
    """The decoration of the file that starts with `lines` (None: its lines carry none)."""
    from engine.headers import reads_prefix  # the header rules read what is theirs

    size, share, min_lines, anywhere, shapes = _data()
    sample = [ln for ln in lines[:size] if ln.strip()]
    if len(sample) < min_lines:
        return None
    colour = next(((n, rx) for n, rx in anywhere if any(compiled(rx).search(ln) for ln in sample)), None)
    if colour is not None:
        sample = [compiled(colour[1]).sub("", ln) for ln in sample]
    need = share * len(sample)
    for shape in shapes:
        found = [m for m in map(shape.rx.match, sample) if m is not None and m.end()]
        if len(found) < need:
            continue
        prefix = shape.rx.pattern
        if shape.increasing:
            nums = [int(m.group("n")) for m in found]
            if sum(b > a for a, b in zip(nums, nums[1:], strict=False)) < share * (len(nums) - 1):
                continue
        if shape.constant:
            tag, n = Counter(m.group(0).strip() for m in found).most_common(1)[0]
            if n < need or sum(reads_prefix(ln) for ln in sample) >= need:
                continue
            prefix = re.escape(tag) + r"[ \t]?"
        return Decoration(anywhere=colour[1] if colour else None, prefix=prefix, suffix=shape.suffix,
                          name="+".join([*([colour[0]] if colour else []), shape.name]))
    return Decoration(anywhere=colour[1], name=colour[0]) if colour else None


def strip(line: str, decoration: Decoration | None) -> str:
    """`line` without `decoration` (the line itself when there is none)."""
    return line if decoration is None else decoration.strip(line)
