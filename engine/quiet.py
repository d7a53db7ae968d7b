"""Evidence for lines that carry no error word: known signatures and precursors, one insertion point.

`score_events` calls `quiet_evidence` once the lexicon and the roles have weighed every candidate:
a known root signature lifts its event's severity, a known consequence makes its event a cascade
(`engine.known`), and, with history jobs, a node's quiet system-log line before the first alarm is
lifted as a precursor (`engine.precursor`). Only events the roles left as possible root causes
change. With no signatures and no history, nothing does.
"""
from __future__ import annotations

from collections.abc import Sequence

from engine.known import KnownSignature, known_evidence
from engine.model import ClockNote, ParsedJob
from engine.precursor import precursors


def quiet_evidence(parsed: ParsedJob, candidates: Sequence[int], severity: dict[int, float],
                   roles: dict[int, str], *, cascade: str, alarm: float, known: Sequence[KnownSignature] = (),
                   history: bool = False, clock: Sequence[ClockNote] = ()) -> dict[int, str]:
    """Update `severity` and `roles` in place; return event id -> the known signature it matched."""
    found = known_evidence(parsed, candidates, known)
    for i, lift in found.lift.items():
        if i not in roles:
            severity[i] = max(severity[i], lift)
    for i in found.consequence:
        roles.setdefault(i, cascade)
    if history:
        for i, lift in precursors(parsed, candidates, severity, roles, alarm=alarm, clock=clock).items():
            severity[i] = max(severity[i], lift)
    return found.signature
