"""Ranking of candidate events: what an engineer should read first.

An event's score combines how alarming its text is (severity lexicon and level), how specific it is
to a few nodes (a root cause sits on the faulty node; a cascade is everywhere), and how rare it is.
Known cascade events are damped so that one ECC error outranks 120 watchdog timeouts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.model import ParsedJob
from engine.severity import is_cascade, severity

MAX_EVENTS = 10
MIN_SCORE = 0.2  # events below this are not worth an engineer's time
RELATIVE = 0.5  # and neither are those far below the best one
CASCADE_FACTOR = 0.55


@dataclass(frozen=True)
class ScoredEvent:
    id: int
    score: float
    severity: float
    cascade: bool


def score_events(parsed: ParsedJob, candidates: list[int]) -> list[ScoredEvent]:
    """Every candidate scored, best first."""
    n_nodes = max(1, len(parsed.node_counts))
    out = []
    for i in candidates:
        t = parsed.templates[i]
        sev = severity(t.template, t.level)
        k = max(1, len(t.nodes))
        spec = 1.0 if n_nodes == 1 else 1.0 - (k - 1) / (n_nodes - 1)
        rarity = 1.0 / (1.0 + math.log10(max(1, t.count)))
        cascade = is_cascade(t.template)
        score = sev * (0.6 + 0.25 * spec + 0.15 * rarity) * (CASCADE_FACTOR if cascade else 1.0)
        out.append(ScoredEvent(i, round(min(1.0, score), 4), sev, cascade))
    out.sort(key=lambda e: (-e.score, parsed.templates[e.id].first_seen or "~", e.id))
    return out


def select_events(scored: list[ScoredEvent]) -> list[ScoredEvent]:
    """The events worth reading: above the floor, near the best, at most MAX_EVENTS."""
    if not scored:
        return []
    top = scored[0].score
    floor = max(MIN_SCORE, RELATIVE * top)
    return [e for e in scored if e.score >= floor][:MAX_EVENTS]
