"""Cross-job filtering: events that successful jobs of the same family also log are not failure signs."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from engine.model import ParsedJob


def normal_templates(history: Sequence[ParsedJob], extra: Iterable[str] = ()) -> set[str]:
    """Templates seen in any succeeded history job, plus `extra` (e.g. a knowledge-base pool)."""
    normal = set(extra)
    for job in history:
        normal.update(t.template for t in job.templates)
    return normal


def candidate_events(parsed: ParsedJob, normal: set[str]) -> list[int]:
    """Ids of the failed job's events that no normal job shows (all events when there is no history)."""
    return [i for i, t in enumerate(parsed.templates) if t.template not in normal]
