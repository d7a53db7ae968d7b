"""The job's clocks: year-less stamps given the job's year, and skewed or backwards clocks noted.

Timestamps reach here as the fixed-width UTC strings of `engine.headers` (they sort in time order).
A stamp without a year (glog `I0506 …`, syslog `Nov 29 …`) was completed with a filler year (the
file's modification year), which is wrong for logs copied later: `settle_years` moves every
year-less stamp to the year, among the job's year and its neighbours, nearest to the job's dated
stamps. `clock_notes` finds a node whose clock runs a steady offset from the others' (the same
events, logged everywhere, are stamped consistently earlier or later on it) and a rank file whose
clock went backwards (a later line carries an earlier stamp), so the diagnosis can say so and the
stage is not read from an unreliable timeline.
"""

from __future__ import annotations

import statistics
from datetime import datetime

from engine.headers import has_year, utc_iso
from engine.model import ClockNote, ParsedJob

SKEW_MIN_SECONDS = 120.0  # smaller offsets are launch jitter, not a clock
SKEW_MIN_EVENTS = 4  # events logged on the node and elsewhere that must agree on its offset
SKEW_AGREEMENT = 0.25  # their offsets may stray this share of the median from it
BACKWARDS_MIN_SECONDS = 60.0
BACKWARDS_MIN_EVENTS = 2  # later events stamped before an earlier one
YEARLESS_FAR_DAYS = 180  # a node's last stamp this far from the job's is a year-less one


def _dt(ts: str | None) -> datetime | None:
    if not ts:
        return None
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None


def _nearest_year(ts: str, ref: datetime) -> str:
    """`ts` with its year replaced by the one of ref's year - 1, + 0, + 1 that is nearest to `ref`."""
    dt = _dt(ts)
    if dt is None:
        return ts
    best = None
    for y in (ref.year - 1, ref.year, ref.year + 1):
        try:
            cand = dt.replace(year=y)
        except ValueError:  # 29 February
            continue
        gap = abs((cand - ref).total_seconds())
        if best is None or gap < best[0]:
            best = (gap, cand)
    return utc_iso(best[1]) if best else ts


def settle_years(parsed: ParsedJob) -> int:
    """Give the year-less stamps of `parsed` the job's year (from its dated stamps), in place.
    Returns how many templates were moved."""
    dated: list[datetime] = []
    yearless: list[int] = []
    for i, t in enumerate(parsed.templates):
        if t.first_seen is None or not t.examples:
            continue
        y = has_year(t.examples[0])
        if y is None:
            continue
        if y:
            d = _dt(t.first_seen)
            if d is not None:
                dated.append(d)
        else:
            yearless.append(i)
    if not dated or not yearless:
        return 0
    ref = sorted(dated)[len(dated) // 2]
    moved = 0
    yl = set(yearless)
    for i in yearless:
        t = parsed.templates[i]
        new = _nearest_year(t.first_seen, ref) if t.first_seen else None
        if new == t.first_seen:
            continue
        moved += 1
        t.first_seen = new
        if t.last_seen:
            t.last_seen = _nearest_year(t.last_seen, ref)
    for seen in parsed.node_first_seen.values():
        for i in yl & seen.keys():
            seen[i] = _nearest_year(seen[i], ref)
    for node, ts in parsed.node_last_ts.items():
        d = _dt(ts)
        if d is not None and abs((d - ref).days) > YEARLESS_FAR_DAYS:
            parsed.node_last_ts[node] = _nearest_year(ts, ref)
    return moved


def _skews(parsed: ParsedJob) -> dict[str, tuple[float, int]]:
    """Node -> (steady offset in seconds from the other nodes, events it rests on)."""
    nodes = [n for n in parsed.node_first_seen if parsed.node_first_seen[n]]
    if len(nodes) < 2:
        return {}
    deltas: dict[str, list[float]] = {n: [] for n in nodes}
    ids = set().union(*(parsed.node_first_seen[n].keys() for n in nodes))
    for i in ids:
        per = {n: _dt(parsed.node_first_seen[n].get(i)) for n in nodes}
        per = {n: d for n, d in per.items() if d is not None}
        if len(per) < 2:
            continue
        for n, d in per.items():
            others = sorted((o - d).total_seconds() for m, o in per.items() if m != n)
            deltas[n].append(-statistics.median(others))
    out = {}
    for n, ds in deltas.items():
        if len(ds) < SKEW_MIN_EVENTS:
            continue
        med = statistics.median(ds)
        if abs(med) < SKEW_MIN_SECONDS:
            continue
        agree = sum(1 for d in ds if abs(d - med) <= SKEW_AGREEMENT * abs(med))
        if agree >= max(SKEW_MIN_EVENTS, 0.75 * len(ds)):
            out[n] = (med, len(ds))
    if len(out) > len(nodes) / 2:  # most nodes "skewed": no common clock to measure against
        return {}
    return out


def _backwards(parsed: ParsedJob) -> dict[str, float]:
    """Node -> the largest step back of the clock in one of its rank files (seconds)."""
    files_of: dict[str, list[str]] = {}
    for path, node in parsed.file_nodes.items():
        files_of.setdefault(node, []).append(path)
    out: dict[str, float] = {}
    for node, paths in files_of.items():
        seen = parsed.node_first_seen.get(node, {})
        in_files: dict[int, int] = {}
        for p in paths:
            for i in parsed.positions.get(p, {}):
                in_files[i] = in_files.get(i, 0) + 1
        for p in paths:
            pos = parsed.positions.get(p, {})
            own = sorted((first, i) for i, (first, _) in pos.items() if in_files.get(i) == 1 and i in seen)
            top: datetime | None = None
            behind: list[float] = []
            for _, i in own:
                d = _dt(seen[i])
                if d is None:
                    continue
                if top is not None and (top - d).total_seconds() >= BACKWARDS_MIN_SECONDS:
                    behind.append((top - d).total_seconds())
                elif top is None or d > top:
                    top = d
            if len(behind) >= BACKWARDS_MIN_EVENTS:
                out[node] = max(out.get(node, 0.0), max(behind))
        # no event can first appear after the file's last line: if one does, the clock went back
        # (a node's last stamp may come from another of its files, so one file per node only)
        if len(paths) != 1:
            continue
        last = _dt(parsed.node_last_ts.get(node))
        latest = max((d for d in map(_dt, seen.values()) if d is not None), default=None)
        step = (latest - last).total_seconds() if last is not None and latest is not None else 0.0
        if step >= BACKWARDS_MIN_SECONDS:
            out[node] = max(out.get(node, 0.0), step)
    return out


def _span(seconds: float) -> str:
    s = abs(seconds)
    if s >= 3600:
        return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"
    if s >= 60:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{s:.0f} s"


def clock_notes(parsed: ParsedJob) -> list[ClockNote]:
    """Skewed and backwards clocks of `parsed`, one note per node and kind."""
    notes = []
    for node, (off, n) in sorted(_skews(parsed).items()):
        way, when = ("ahead of", "later") if off > 0 else ("behind", "earlier")
        notes.append(ClockNote(kind="skew", node=node, seconds=round(off, 3),
                               note=f"{node}'s clock is {_span(off)} {way} the other nodes' "
                                    f"(the same {n} events are stamped that much {when})"))
    for node, back in sorted(_backwards(parsed).items()):
        notes.append(ClockNote(kind="backwards", node=node, seconds=round(-back, 3),
                               note=f"{node}'s clock went back by up to {_span(back)} "
                                    "(later lines carry earlier timestamps)"))
    return notes
