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
MIN_SCORE = 0.35  # events below this are not worth an engineer's time
RELATIVE = 0.5  # and neither are those far below the best one
CASCADE_FACTOR = 0.55
ROOT_SEVERITY = 0.8
TRUNCATED_SEVERITY = 0.8


@dataclass(frozen=True)
class ScoredEvent:
    id: int
    score: float
    severity: float
    cascade: bool


def score_events(parsed: ParsedJob, candidates: list[int]) -> list[ScoredEvent]:
    """Every candidate scored, best first."""
    n_nodes = max(1, len(parsed.node_counts))
    rows = []
    files = max(1, len(parsed.file_nodes))
    # a cut-off last line means a crash only when few files have one (some writers never end lines)
    cut_tails = parsed.truncated_tails if sum(parsed.truncated_tails.values()) <= files / 4 else {}
    for i in candidates:
        t = parsed.templates[i]
        k = max(1, len(t.nodes))
        spec = 1.0 if n_nodes == 1 else 1.0 - (k - 1) / (n_nodes - 1)
        sev = severity(t.template, t.level)
        if cut_tails.get(i):  # the last words of a rank that died mid-line
            sev = max(sev, TRUNCATED_SEVERITY)
        rows.append((i, sev, spec, is_cascade(t.template)))
    # Cascades are damped only when a root cause is in sight: a severe, non-cascade event on few
    # nodes. With none (a silent hang), the timeouts are the best evidence there is.
    has_root = any(sev >= ROOT_SEVERITY and not cascade and spec >= 0.5 for _, sev, spec, cascade in rows)
    out = []
    for i, sev, spec, cascade in rows:
        t = parsed.templates[i]
        rarity = 1.0 / (1.0 + math.log10(max(1, t.count)))
        damp = CASCADE_FACTOR + (1 - CASCADE_FACTOR) * spec if cascade and has_root else 1.0
        score = sev * (0.6 + 0.25 * spec + 0.15 * rarity) * damp
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
