"""The job's clocks: year-less stamps given the job's year, and skewed or backwards clocks noted.

Timestamps reach here as the fixed-width UTC strings of `engine.headers` (they sort in time order).
A stamp without a year (glog `I0506 …`, syslog `Nov 29 …`) was completed with a filler year (the
file's modification year), which is wrong for logs copied later: `settle_years` moves every
year-less stamp to the year, among the job's year and its neighbours, nearest to the job's dated
stamps. `clock_notes` finds a node whose clock runs a steady offset from the others' (the same
events, logged everywhere, are stamped consistently earlier or later on it) and a rank file whose
clock went backwards (a later line carries an earlier stamp), so the diagnosis can say so and the
stage is not read from an unreliable timeline.

`settle_zones` runs first: a node whose files mix offset-aware stamps (a program's logger writing
`…+05:30`) with naive ones (its launcher's `W1201 10:00:00`, local time) has its naive stamps read
in the zone that makes them continue its aware ones, and the diagnosis says so (a `zone` note),
instead of a clock that seems to go back by the zone's offset. Nodes whose stamps are all naive
keep `L4_LOG_TZ` (their zones are aligned against each other by `engine.spatial.zone_offsets`).
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Iterable
from datetime import datetime, timedelta

from engine.headers import has_year, naive_stamp, naive_zone, utc_iso
from engine.model import ClockNote, ParsedJob

SKEW_MIN_SECONDS = 120.0  # smaller offsets are launch jitter, not a clock
SKEW_MIN_EVENTS = 4  # events logged on the node and elsewhere that must agree on its offset
SKEW_AGREEMENT = 0.25  # their offsets may stray this share of the median from it
BACKWARDS_MIN_SECONDS = 60.0
BACKWARDS_MIN_EVENTS = 2  # later events stamped before an earlier one
YEARLESS_FAR_DAYS = 180  # a node's last stamp this far from the job's is a year-less one
ZONE_QUANTUM = 900  # time zones differ by whole quarter hours
ZONE_MIN_STAMPS = 2  # naive and aware stamps (distinct events) below which only the line order reads a zone
ZONE_FIT_SECONDS = 300.0  # naive stamps, moved into their zone, lie this near the node's aware ones
ZONE_RANGE = (-12 * 3600, 14 * 3600)  # UTC offsets of the world's zones
ZONE_SNAP_SECONDS = 120.0  # a naive-only node this near whole quarter hours off the others: another zone


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


def _order_faults(files: list[list[tuple[int, float, bool]]], shift: float) -> int:
    """Stamps that come back in time (by BACKWARDS_MIN_SECONDS or more) in line order, over the files
    (each a list of (line, epoch seconds, naive)), with `shift` taken from the naive stamps."""
    faults = 0
    for items in files:
        top: float | None = None
        for _, t, naive in items:
            t = t - shift if naive else t
            if top is not None and top - t >= BACKWARDS_MIN_SECONDS:
                faults += 1
            elif top is None or t > top:
                top = t
    return faults


def _gap(naive: list[float], aware: list[float], shift: float) -> float:
    """The median distance of the naive stamps, moved by `shift`, to the nearest aware stamp."""
    gaps = []
    for t in naive:
        t -= shift
        k = bisect.bisect_left(aware, t)
        gaps.append(min(abs(aware[j] - t) for j in (k - 1, k) if 0 <= j < len(aware)))
    return statistics.median(gaps)


def _naive_shift(files: list[list[tuple[int, float, bool]]], naive: list[float], aware: list[float],
                 zone_offset: float, by_order: bool = False) -> float:
    """How far (seconds, whole quarter hours) a node's naive stamps, read in the `L4_LOG_TZ` zone whose
    UTC offset is `zone_offset`, run ahead of its offset-aware ones; 0.0 when nothing shows a zone.
    The shift that leaves the fewest stamps going back in line order within its files wins; between
    equals (naive and aware stamps in other files: a launcher's log beside its workers'), the one
    that puts the naive stamps nearest the aware ones, else the smallest. `by_order`: too few stamps to
    tell a zone by nearness alone, so only a shift that puts the lines of its files back in order counts."""
    aware = sorted(aware)
    lo, hi = ZONE_RANGE[0] - zone_offset, ZONE_RANGE[1] - zone_offset
    cands = [q * ZONE_QUANTUM for q in range(int(lo // ZONE_QUANTUM), int(hi // ZONE_QUANTUM) + 1)]
    scored = {s: (_order_faults(files, s), _gap(naive, aware, s)) for s in cands}
    base = scored[0] if 0 in scored else (_order_faults(files, 0.0), _gap(naive, aware, 0.0))
    best = min(scored, key=lambda s: (scored[s][0], scored[s][1] > ZONE_FIT_SECONDS, abs(s)))
    faults, gap = scored[best]
    if best == 0 or gap > ZONE_FIT_SECONDS:
        return 0.0
    if faults < base[0] or (not by_order and faults == base[0] and base[1] >= ZONE_QUANTUM / 2):
        return float(best)
    return 0.0


def _zone_name(seconds: float) -> str:
    sign = "+" if seconds >= 0 else "-"
    s = int(abs(seconds))
    return f"UTC{sign}{s // 3600:02d}:{s % 3600 // 60:02d}"


def settle_zones(parsed: ParsedJob) -> list[ClockNote]:
    """Read each node's naive stamps in the zone its own offset-aware stamps show, in place (see the
    module's docstring); returns a `zone` note per node moved (`seconds`: how far its naive stamps ran
    ahead when read in `L4_LOG_TZ`). Nodes with only naive or only aware stamps are left as they are."""
    kinds = _stamp_kinds(parsed)
    files_of: dict[str, list[str]] = {}
    for path, node in parsed.file_nodes.items():
        files_of.setdefault(node, []).append(path)
    notes: list[ClockNote] = []
    moved: dict[str, float] = {}
    for node, seen in sorted(parsed.node_first_seen.items()):
        kind = kinds.get(node, {})
        stamps = {i: d.timestamp() for i, ts in seen.items() if i in kind and (d := _dt(ts)) is not None}
        naive = [t for i, t in stamps.items() if kind[i]]
        aware = [t for i, t in stamps.items() if not kind[i]]
        if not naive or not aware:
            continue
        few = len(naive) < ZONE_MIN_STAMPS or len(aware) < ZONE_MIN_STAMPS  # then the line order decides
        paths = files_of.get(node, [])
        in_files: dict[int, int] = {}
        for p in paths:
            for i in parsed.positions.get(p, {}):
                in_files[i] = in_files.get(i, 0) + 1
        files = [sorted((first, stamps[i], kind[i]) for i, (first, _) in parsed.positions.get(p, {}).items()
                        if i in stamps and in_files.get(i) == 1) for p in paths]
        offset = _local_offset(seen.values())
        shift = _naive_shift(files, naive, aware, offset, by_order=few)
        if not shift:
            continue
        moved[node] = shift
        for i in [i for i in seen if kind.get(i)]:
            seen[i] = _moved(seen[i], shift)
        zone = _zone_name(shift + offset)
        way = "ahead of" if shift > 0 else "behind"
        notes.append(ClockNote(kind="zone", node=node, seconds=shift,
                               note=f"{node}'s stamps without an offset are read as local time {zone}: so "
                                    f"they continue its stamps with an offset (read in the default zone "
                                    f"they ran {_span(shift)} {way} them)"))
    if moved:
        _settle_templates(parsed, moved, {i for n in moved for i, naive in kinds.get(n, {}).items() if naive})
    whole = _settle_node_zones(parsed, kinds, moved)
    for node, shift in whole.items():
        notes.append(_zone_note(parsed, node, shift))
        stamps = parsed.node_first_seen[node]
        for i in stamps:
            stamps[i] = _moved(stamps[i], shift)
    if whole:
        _settle_templates(parsed, whole, None)
    return notes


def _stamp_kinds(parsed: ParsedJob) -> dict[str, dict[int, bool]]:
    """Node -> event -> whether the event's first stamp on that node is naive: from the parse
    (`ParsedJob.node_naive`, the line each stamp was read from), else from the event's example lines
    when they agree (one event may be written naive on one node and with an offset on another)."""
    if parsed.node_naive:
        return {n: {i: v for i, v in parsed.node_naive.get(n, {}).items() if i in seen}
                for n, seen in parsed.node_first_seen.items()}
    kind: dict[int, bool] = {}
    for i, t in enumerate(parsed.templates):
        seen = {naive_stamp(e) for e in t.examples} - {None}
        if t.first_seen is not None and len(seen) == 1:
            kind[i] = seen.pop()  # type: ignore[assignment]
    return {n: {i: kind[i] for i in seen if i in kind} for n, seen in parsed.node_first_seen.items()}


def reference_node(seen: dict[str, dict[int, str]]) -> str:
    """The node (of node -> event -> first stamp) that shares the most events with the others, the
    first by name between equals: the clock the others are measured against."""
    return max(sorted(seen), key=lambda n: sum(len(seen[n].keys() & seen[m].keys()) for m in seen if m != n))


def _quarters_ahead(a: dict[int, str], b: dict[int, str]) -> int | None:
    """How many whole quarter hours the stamps `a` (template -> first stamp) run ahead of `b`'s on the
    events both log: at least SKEW_MIN_EVENTS of them, their median difference within ZONE_SNAP_SECONDS
    of a whole quarter hour, and three in four of them agreeing with it; None otherwise."""
    diffs = [(da - db).total_seconds() for i in a.keys() & b.keys()
             if (da := _dt(a[i])) is not None and (db := _dt(b[i])) is not None]
    if len(diffs) < SKEW_MIN_EVENTS:
        return None
    q = round(statistics.median(diffs) / ZONE_QUANTUM)
    near = sum(1 for d in diffs if abs(d - q * ZONE_QUANTUM) <= ZONE_SNAP_SECONDS)
    return q if near >= 0.75 * len(diffs) else None


def _settle_node_zones(parsed: ParsedJob, kinds: dict[str, dict[int, bool]], settled: Iterable[str]
                       ) -> dict[str, float]:
    """Nodes whose clocks run a whole number of quarter hours (to within launch jitter) ahead of or behind
    the job's reference clock on the events they share: each writes its stamps in another zone (a
    drifting clock is off by seconds or minutes, not by exactly N hours). Returns node -> shift (seconds)
    for the nodes to move onto the reference clock. The reference is the zone most nodes share (between
    equals: the one with offset-aware stamps, else the nearest), measured from the node that shares the
    most events with the others. Nodes `settled` by their own aware stamps count, but are not moved."""
    seen = {n: s for n, s in parsed.node_first_seen.items() if s}
    if len(seen) < 2:
        return {}
    ref = reference_node(seen)
    ahead = {n: _quarters_ahead(seen[n], seen[ref]) if n != ref else 0 for n in seen}
    aware = {n for n, s in seen.items() if any(kinds.get(n, {}).get(i) is False for i in s)} | set(settled)
    groups: dict[int, set[str]] = {}
    for n, q in ahead.items():
        if q is not None:
            groups.setdefault(q, set()).add(n)
    base = max(sorted(groups, key=abs), key=lambda q: (len(groups[q]), bool(groups[q] & aware)))
    return {n: float((q - base) * ZONE_QUANTUM) for n, q in sorted(ahead.items())
            if q is not None and q != base and n not in settled}


def _local_offset(stamps: Iterable[str]) -> float:
    """The UTC offset (seconds) of `L4_LOG_TZ`, where naive stamps are read, at the first of `stamps`."""
    first = _dt(min(stamps))
    offset = naive_zone().utcoffset(first.replace(tzinfo=None)) if first is not None else None
    return offset.total_seconds() if offset else 0.0


def _zone_note(parsed: ParsedJob, node: str, shift: float) -> ClockNote:
    offset = _local_offset(parsed.node_first_seen[node].values())
    way = "ahead of" if shift > 0 else "behind"
    return ClockNote(kind="zone", node=node, seconds=shift,
                     note=f"{node}'s stamps run {_span(shift)} {way} the other nodes' on the same events, a "
                          f"whole number of quarter hours: another time zone (its naive stamps are local "
                          f"time {_zone_name(offset + shift)}), not a drifting clock; they "
                          f"are read moved by that much")


def _moved(ts: str, shift: float) -> str:
    d = _dt(ts)
    return utc_iso(d - timedelta(seconds=shift)) if d is not None else ts


def _settle_templates(parsed: ParsedJob, moved: dict[str, float], naive: set[int] | None) -> None:
    """The nodes' last stamps and the job-wide first and last stamps of the events `naive` on a moved
    node (None: of every event), after the naive (or all) stamps of the `moved` nodes were moved by
    their shift. A last stamp may come from a naive or an aware line: the one read is the earliest
    reading not before the node's (or job's) other stamps."""
    for node, shift in moved.items():
        last = parsed.node_last_ts.get(node)
        if last is None:
            continue
        top = max(parsed.node_first_seen.get(node, {}).values(), default=last)
        floor = _moved(top, BACKWARDS_MIN_SECONDS)
        readings = sorted({last, _moved(last, shift)})
        parsed.node_last_ts[node] = next((r for r in readings if r >= floor), readings[-1])
    stamps = [ts for seen in parsed.node_first_seen.values() for ts in seen.values()]
    end = max([*parsed.node_last_ts.values(), *stamps], default="~")
    for i, t in enumerate(parsed.templates):
        if naive is not None and i not in naive:
            continue
        firsts = [s[i] for s in parsed.node_first_seen.values() if i in s]
        if firsts:
            t.first_seen = min(firsts)
        if t.last_seen is None or t.first_seen is None:
            continue
        shifts = sorted({moved.get(n, 0.0) for n, c in parsed.node_counts.items() if c.get(i)}) or [0.0]
        readings = [_moved(t.last_seen, s) for s in shifts]
        fits = [r for r in readings if t.first_seen <= r <= end] if len(shifts) > 1 else readings
        t.last_seen = max(max(fits), t.first_seen) if fits else t.first_seen


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


TRUSTED_KINDS = frozenset({"zone"})  # notes after which the timeline is still trusted (settle_zones)


def timeline_trusted(notes: Iterable[ClockNote]) -> bool:
    """Whether the stage may be read from the stamps of a job with these clock notes: none but `zone`
    notes (a skewed or backwards clock makes the timeline unreliable)."""
    return all(n.kind in TRUSTED_KINDS for n in notes)


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
