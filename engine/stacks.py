"""Stack dumps of all ranks (`py-spy dump` output, Python `faulthandler` blocks), grouped.

Where a job hangs, the healthy ranks all wait in the same place (inside the collective), so their
stacks are the same; the rank that holds them up stands somewhere else. As ByteDance's ByteRobust
does, the stacks are grouped by their frames (function and file, innermost first, line numbers
ignored so that two ranks one line apart still group); the largest group is taken as healthy and
the small groups outside it (`outlier_share` of the ranks at most, `engine/data/hang.yaml`) are the
suspects. One stack per rank: the main thread's (py-spy names it; in a faulthandler block it is the
thread whose outermost frame is `<module>`), the last dump of a rank when there are several.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from engine.rules import compiled, load

_PYSPY_THREAD = re.compile(r'^Thread (?:0x)?[0-9A-Fa-f]+ \([^)]*\): "(?P<name>[^"]*)"')
_PYSPY_FRAME = re.compile(r"^\s+(?P<func>\S.*?) \((?P<file>[^()]*?):(?P<line>\d+)\)\s*$")
_FH_THREAD = re.compile(r"(?:Current thread|Thread) 0x[0-9A-Fa-f]+ \(most recent call first\):")
_FH_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')
FAULTHANDLER_MARK = b"(most recent call first):"


@dataclass
class Stack:
    rank: int
    frames: list[str]  # "func (file)", innermost first
    source: str  # the file it came from


@dataclass
class Group:
    frames: list[str]
    ranks: list[int] = field(default_factory=list)
    outlier: bool = False


def _frame(func: str, file: str) -> str:
    return f"{func} ({file.rsplit('/', 1)[-1]})"


def pick_thread(threads: list[tuple[str, list[str]]]) -> list[str]:
    """The main thread's frames among a dump's threads (by name, else the one that runs `<module>`)."""
    for name, frames in threads:
        if name == "MainThread" and frames:
            return frames
    for _, frames in threads:
        if frames and frames[-1].startswith("<module>"):
            return frames
    return next((f for _, f in threads if f), [])


def parse_pyspy(text: str) -> list[str]:
    """The main thread's frames of one `py-spy dump` (the last process in it), innermost first."""
    threads: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("Process "):
            threads = []
        m = _PYSPY_THREAD.match(line)
        if m:
            threads.append((m.group("name"), []))
            continue
        m = _PYSPY_FRAME.match(line)
        if m and threads:
            threads[-1][1].append(_frame(m.group("func"), m.group("file")))
    return pick_thread(threads)


def fh_thread_start(line: str) -> bool:
    """Whether `line` opens a thread of a faulthandler dump ("Thread 0x… (most recent call first):")."""
    return _FH_THREAD.search(line) is not None


def fh_frame(line: str) -> str | None:
    """The frame ("func (file)") a faulthandler dump's line names, if it is a frame line."""
    m = _FH_FRAME.search(line)
    return _frame(m.group("func"), m.group("file")) if m else None


def parse_faulthandler(lines: Iterable[str]) -> list[str]:
    """The main thread's frames of the last faulthandler dump in `lines`, innermost first (launcher
    prefixes such as `[default3]:` before the text are allowed)."""
    dumps: list[list[tuple[str, list[str]]]] = []
    in_block = False
    for line in lines:
        if fh_thread_start(line):
            if not in_block:
                dumps.append([])
                in_block = True
            dumps[-1].append(("", []))
            continue
        if in_block:
            frame = fh_frame(line)
            if frame is not None:
                dumps[-1][-1][1].append(frame)
            elif line.strip() and not line.strip().endswith(":"):
                in_block = False
    return pick_thread(dumps[-1]) if dumps else []


def _key(frames: list[str]) -> tuple[str, ...]:
    ignore = [compiled(p) for p in load("hang")["stacks"]["ignore_frames"]]
    return tuple(f for f in frames if not any(p.search(f.split(" (", 1)[0]) for p in ignore))


def group_stacks(stacks: list[Stack]) -> list[Group]:
    """Groups of identical stacks, largest first, with the outliers marked."""
    by_key: dict[tuple[str, ...], Group] = {}
    for s in sorted(stacks, key=lambda s: s.rank):
        if not s.frames:
            continue
        key = _key(s.frames)
        by_key.setdefault(key, Group(frames=list(key))).ranks.append(s.rank)
    groups = sorted(by_key.values(), key=lambda g: (-len(g.ranks), g.ranks))
    if len(groups) < 2:
        return groups
    total = sum(len(g.ranks) for g in groups)
    largest = len(groups[0].ranks)
    cap = max(1.0, load("hang")["stacks"]["outlier_share"] * total)
    if largest > 1:
        for g in groups[1:]:
            g.outlier = len(g.ranks) < largest and len(g.ranks) <= cap
    return groups
