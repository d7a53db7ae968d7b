"""Which files of a job folder are flight-recorder dumps or stack dumps, not rank logs.

The rules are data (`engine/data/hang.yaml`): dump folders, and file-name patterns such as PyTorch's
default `nccl_trace_rank_<N>` with or without a host name. Ingest skips these files (they are not
log text); `engine.flightrec` and `engine.stacks` read them.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from engine.rules import compiled, load, size_text


@dataclass
class HangFiles:
    dumps: list[Path] = field(default_factory=list)
    stacks: list[Path] = field(default_factory=list)


def _kind(parts: tuple[str, ...]) -> str | None:
    """"dump", "stack" or None for a file at `parts` (its path relative to the job folder)."""
    rules = load("hang")
    name = parts[-1]
    for p in rules["flight_recorder"]["name_patterns"]:
        if compiled(p).search(name):
            return "dump"
    for p in rules["stacks"]["name_patterns"]:
        if compiled(p).search(name):
            return "stack"
    folders = set(parts[:-1])
    if folders & set(rules["flight_recorder"]["folders"]):
        return "dump"
    if folders & set(rules["stacks"]["folders"]):
        return "stack"
    return None


def is_hang_file(rel: Path) -> bool:
    """True when the file at `rel` (relative to the job folder) is a dump, not a rank log."""
    return _kind(rel.parts) is not None


def find_hang_files(root: Path | str) -> HangFiles:
    """The dump and stack files under the job folder `root`, sorted."""
    root = Path(root)
    found = HangFiles()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel = Path(dirpath).relative_to(root)
        for name in sorted(filenames):
            kind = _kind((rel / name).parts)
            if kind == "dump":
                found.dumps.append(Path(dirpath) / name)
            elif kind == "stack":
                found.stacks.append(Path(dirpath) / name)
    return found


def dump_rank_host(path: Path) -> tuple[int | None, str | None]:
    """The rank and host a dump's file name gives (either may be None)."""
    for p in load("hang")["flight_recorder"]["name_patterns"]:
        m = compiled(p).search(path.name)
        if m:
            host = m.groupdict().get("host") or m.groupdict().get("host2")
            return int(m.group("rank")), host
    m = compiled(r"(\d{1,6})(?:\.[A-Za-z]+)?$").search(path.name)
    return (int(m.group(1)) if m else None), None


class UnreadableDump(ValueError):
    """A dump beside the logs that is not read; its text is the one-line reason."""


def read_capped(path: Path, cap: int, what: str) -> bytes:
    """The bytes of the dump at `path`; `UnreadableDump` when it is over `cap` bytes or unreadable."""
    try:
        if path.stat().st_size > cap:
            raise UnreadableDump(f"{what} over {size_text(cap)}, not read")
        return path.read_bytes()
    except OSError as exc:
        raise UnreadableDump(f"unreadable ({exc.strerror or exc.__class__.__name__})") from None
