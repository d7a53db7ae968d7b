"""torchrun's "Root Cause (first observed failure)" blocks: which rank died first, and how.

Each launcher agent whose workers failed prints a block naming the first failure it observed (time,
host, rank, exitcode, error file, traceback). The blocks are read from the rank files that hold one
(only up to the block). A block whose rank died of a signal the launcher did not send (it sends
SIGTERM to the survivors) names a rank that could not say anything itself: a SIGKILL (the OOM
killer, an operator), a segfault, an abort. Its lines are the evidence, and its host is the node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from engine.headers import parse_header
from engine.model import ParsedJob
from engine.rules import load
from engine.window import read_window

BLOCK_LINES = 12
MAX_BLOCKS = 16  # files read for their block, the shortest first (a launcher's own log before a console)
_HEAD = re.compile(r"Root Cause \(first observed failure\):")
_FIELD = re.compile(r"^(?P<key>time|host|rank|exitcode|error_file|traceback)\s*:\s*(?P<value>.*)$")
_EXIT = re.compile(r"^(-?\d+)")
_SIGNAL = re.compile(r"\((SIG[A-Z]+)\)")


@dataclass
class FirstFailure:
    path: str  # the file the block was read from
    node: str  # that file's node
    fields: dict[str, str] = field(default_factory=dict)
    lines: dict[str, str] = field(default_factory=dict)  # field -> its raw line

    @property
    def exitcode(self) -> int | None:
        m = _EXIT.match(self.fields.get("exitcode", ""))
        return int(m.group(1)) if m else None

    @property
    def signal(self) -> str | None:
        f = self.fields
        m = _SIGNAL.search(f.get("exitcode", "")) or _SIGNAL.search(f.get("traceback", ""))
        return m.group(1) if m else None

    @property
    def host(self) -> str:
        return self.fields.get("host") or self.node

    @property
    def killed(self) -> bool:
        """The rank died of a signal the launcher did not send."""
        return self.signal is not None and self.signal not in _sent_signals()


@lru_cache(maxsize=1)
def _sent_signals() -> frozenset[str]:
    return frozenset(load("severity")["roles"].get("launcher_signals", ["SIGTERM"]))


def first_failures(parsed: ParsedJob) -> list[FirstFailure]:
    """The blocks of the job, one per rank file that holds one; ranks that were killed first."""
    heads = [i for i, t in enumerate(parsed.templates) if _HEAD.search(t.template)]
    out: list[FirstFailure] = []
    found = [(path, at) for path, pos in parsed.positions.items()
             if (at := next((pos[i][0] for i in heads if i in pos), None)) is not None]
    found.sort(key=lambda pa: (parsed.file_lines.get(pa[0], 0), pa[0]))
    for path, at in found[:MAX_BLOCKS]:
        window = read_window(path, at, before=0, after=BLOCK_LINES)
        if window is None:
            continue
        block = FirstFailure(path=path, node=parsed.file_nodes.get(path, ""))
        for raw in window.lines[window.at + 1:]:
            msg = parse_header(raw, decoration=parsed.decoration_of(path)).message
            if msg.startswith("="):
                break
            m = _FIELD.match(msg)
            if m and m.group("key") not in block.fields:
                block.fields[m.group("key")] = m.group("value").strip()
                block.lines[m.group("key")] = raw
        if block.fields:
            out.append(block)
    out.sort(key=lambda b: (not b.killed, b.path))
    return out
