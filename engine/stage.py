"""Stage attribution: in which stage (init … teardown) did the failure show? Rules: data/stages.yaml."""

from __future__ import annotations

import re
from functools import lru_cache

from engine.model import ParsedJob
from engine.rules import load
from engine.severity import severity

UNKNOWN = "unknown"
MARKER_MAX_SEVERITY = 0.6  # an error line is not progress, whatever words it shares with a stage


@lru_cache(maxsize=1)
def _rules() -> list[tuple[str, re.Pattern[str]]]:
    data = load("stages")
    return [(stage, re.compile(rx)) for stage in data["order"] for rx in data["stages"].get(stage, [])]


def stage_of_template(template: str) -> str | None:
    """The stage a template marks, if it is a stage marker."""
    for stage, rx in _rules():
        if rx.search(template):
            return stage
    return None


def failure_stage(parsed: ParsedJob, event_ids: list[int], *, trust_time: bool = True) -> str:
    """The stage in force where the first of `event_ids` (most indicative first) first appears.

    Looks in the first rank file that holds both the event and stage markers; an event that comes
    before every marker of its file is in `init`. Ranks that print no progress of their own (in
    Megatron-LM only one rank logs iterations) defer to the rank file with the most stage markers,
    read up to the event (or to its end when the event is not in it); the rank that logs
    iterations is preferred.
    """
    markers = {
        i: s for i, t in enumerate(parsed.templates)
        if (s := stage_of_template(t.template)) and severity(t.template, t.level) < MARKER_MAX_SEVERITY
    }
    if not event_ids:
        return UNKNOWN
    by_time = _stage_by_time(parsed, event_ids[0], markers) if trust_time else None
    if by_time is not None:
        return by_time
    main = max(parsed.positions.items(), default=None,
               key=lambda kv: (len(parsed.iterations.get(kv[0], ())), sum(1 for m in markers if m in kv[1]),
                               parsed.file_lines.get(kv[0], 0)))
    for eid in event_ids:
        for pos in parsed.positions.values():
            if eid not in pos:
                continue
            local = _stage_before(pos, pos[eid][0], markers, eid) if any(m in pos for m in markers) else None
            if local not in (None, "init") or main is None:
                return local or "init"
            main_path, main_pos = main
            at = main_pos[eid][0] if eid in main_pos else parsed.file_lines.get(main_path, 0) + 1
            return _stage_before(main_pos, at, markers, eid)
    return UNKNOWN


def _stage_by_time(parsed: ParsedJob, eid: int, markers: dict[int, str]) -> str | None:
    """The stage of the marker seen last before the event, by timestamps across all ranks; None when
    the event or the markers carry no timestamps."""
    t = parsed.templates[eid].first_seen
    if t is None:
        return None
    best: tuple[str, str] | None = None
    timed = 0
    for mid, stage in markers.items():
        m = parsed.templates[mid]
        if mid == eid or m.first_seen is None:
            continue
        timed += 1
        if m.first_seen > t:
            continue
        at = min(m.last_seen or m.first_seen, t)
        if best is None or at > best[0]:
            best = (at, stage)
    if timed == 0:
        return None
    return best[1] if best else "init"


def _stage_before(pos: dict[int, tuple[int, int]], p: int, markers: dict[int, str], eid: int) -> str:
    best: tuple[float, int, str] | None = None
    for mid, stage in markers.items():
        if mid == eid or mid not in pos:
            continue
        first, last = pos[mid]
        if first >= p:
            continue
        at = last if last < p else p - 0.5  # still ongoing when the event appeared
        key = (at, 1 if stage == "training" else 0, stage)
        if best is None or key > best:
            best = key
    return best[2] if best else "init"
