"""The last words of a job that went quiet: where no line the job wrote raises an alarm (a run that hangs
at its end, one that stopped with no error), the line a rank wrote last is the best evidence there is of
where it stopped ("[after training is done] …", NCCL's "Abort COMPLETE", a last "iteration 50/50").
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from engine.model import ParsedJob

# a word of three letters or more that is no level word (some layouts keep "INFO" in the message)
_WORD = re.compile(r"\b(?!(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL|TRACE)\b)[A-Za-z]{3,}")


def last_words(parsed: ParsedJob, candidates: Iterable[int], most: int = 1) -> list[int]:
    """The candidate events that end a log file of the job (the file's last line among the candidates that
    holds a word), at most `most`: the ones fewest files end with first (a rank that stopped somewhere the
    others did not), then the one written furthest into its file."""
    cand = set(candidates)
    ends: dict[str, tuple[int, int]] = {}
    for path, positions in parsed.positions.items():
        best: tuple[int, int] | None = None
        for i, (_, last) in positions.items():
            if i in cand and (best is None or last > best[0]) and _WORD.search(parsed.templates[i].template):
                best = (last, i)
        if best is not None:
            ends[path] = best
    share: Counter[int] = Counter()
    deepest: dict[int, int] = {}
    for line, i in ends.values():
        share[i] += 1
        deepest[i] = max(deepest.get(i, 0), line)
    return sorted(share, key=lambda i: (share[i], -deepest[i], i))[:most]
