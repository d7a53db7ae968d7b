"""Precursors: the quiet line that says what broke, before anything logs an error.

A node's kernel reports a hung NFS server, a blocked task or a throttled CPU in words the
severity lexicon does not know and at no error level; the watchdog timeouts every rank writes
later are what the lexicon sees. A candidate event (new against the history jobs) is a
*precursor* when
- it is a line of a node's system log (a dmesg, journal or syslog file, or a "kernel:" line), or
  (when `new_base` is set) any line whose time is known;
- it is seen on one node or few (at most `max_share` of them);
- it is not later than the failure's first mark on the clock (a cascade, a launcher's summary or
  report, a severe line on at most half the nodes), when its time is known; a line within the
  failure's marks weighs `late` (nodes' clocks disagree by minutes), one after them nothing;
- its node then fails or goes silent: it logs an alarm itself, or stops writing (its last
  stamp or iteration behind the others').
Its severity is lifted to base × exclusivity × earliness × decay^k (`engine/data/precursor.yaml`),
k the number of new system-log lines its node wrote before it. Only with history jobs: without
them every line is new, and a system log's boot lines would all look like precursors.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import PurePath

from engine.masking import MASK
from engine.model import ClockNote, ParsedJob
from engine.rules import load

SILENCE_SECONDS = 30.0  # a node whose last stamp is this far behind the latest went silent
_WORD = re.compile(r"[A-Za-z]{3,}")


def _words(template: str) -> int:
    """How many whole constant words the template has (tokens with no variable part): a line cut
    after its header ("host systemd[1]", "mlx5_core 0000:8a:00") says nothing, however new it is."""
    return sum(1 for tok in template.split() if MASK not in tok and _WORD.search(tok))


@lru_cache(maxsize=1)
def _config() -> dict:
    data = load("precursor")
    return {**data, "files": re.compile(data["system_files"]), "lines": re.compile(data["system_lines"])}


def _ts(ts: str | None) -> datetime | None:
    if not ts:
        return None
    try:
        return datetime.fromisoformat(ts[:26])
    except ValueError:
        return None


def _silent(parsed: ParsedJob, skew: dict[str, float]) -> set[str]:
    last = {n: _ts(ts) for n, ts in parsed.node_last_ts.items()}
    last = {n: t - timedelta(seconds=skew.get(n, 0.0)) for n, t in last.items() if t is not None}
    out: set[str] = set()
    if len(last) >= 2:
        latest = max(last.values())
        out |= {n for n, t in last.items() if (latest - t).total_seconds() >= SILENCE_SECONDS}
    iters = parsed.node_last_iter
    if len(iters) >= 2:
        top = max(iters.values())
        out |= {n for n, it in iters.items() if it < top}
    return out


def precursors(parsed: ParsedJob, candidates: Sequence[int], severity: dict[int, float],
               roles: dict[int, str], *, alarm: float, clock: Sequence[ClockNote] = ()) -> dict[int, float]:
    """Event id -> the severity its precursor evidence gives it (only those it lifts)."""
    cfg = _config()
    nodes = list(parsed.node_counts)
    if len(nodes) < 2:
        return {}
    skew = {c.node: c.seconds for c in clock if c.kind == "skew"}
    severe = [i for i in candidates if severity.get(i, 0.0) >= alarm]
    alarm_nodes = {n for i in severe for n in parsed.templates[i].nodes}
    failing = alarm_nodes | _silent(parsed, skew)
    # the failure's marks on the clock: its reactions (cascades, summaries, reports) and the severe
    # lines on few nodes; a severe line every node logs is a setting's warning, not the failure
    marks = [i for i in severe if roles.get(i) in ("cascade", "consequence", "report")
             or 2 * len(parsed.templates[i].nodes) <= len(nodes)]
    mark_times = [t for i in marks for n in parsed.templates[i].nodes
                  if (t := _ts(parsed.node_first_seen.get(n, {}).get(i))) is not None]
    first, last = (min(mark_times), max(mark_times)) if mark_times else (None, None)
    system_paths = [p for p in parsed.positions if cfg["files"].search(PurePath(p).name)]
    limit = max(1, int(cfg["max_share"] * len(nodes)))
    pool = [i for i in candidates if roles.get(i) is None and severity.get(i, 0.0) < alarm
            and 1 <= len(parsed.templates[i].nodes) <= limit
            and set(parsed.templates[i].nodes) <= failing
            and _words(parsed.templates[i].template) >= cfg["min_words"]]
    if not pool:
        return {}
    system = {i for i in pool if any(i in parsed.positions[p] for p in system_paths)
              or any(cfg["lines"].search(x) for x in parsed.templates[i].examples[:1])}
    order = _order_in_system_logs(parsed, system, set(candidates))
    out: dict[int, float] = {}
    for i in pool:
        t = parsed.templates[i]
        times = [x for n in t.nodes if (x := _ts(parsed.node_first_seen.get(n, {}).get(i))) is not None]
        timed = bool(times) and first is not None
        if i in system:
            base = cfg["base"]
        elif timed:
            base = cfg["new_base"]
        else:
            continue
        if not timed:
            early = cfg["untimed"]
        elif min(times) <= first:
            early = 1.0
        elif min(times) <= last:  # within the failure: clocks of nodes disagree by minutes
            early = cfg["late"]
        else:
            continue  # after the failure's last mark: its aftermath
        exclusive = 1.0 - (len(t.nodes) - 1) / max(1, limit)  # 1 on one node
        lift = base * exclusive * early * cfg["decay"] ** order.get(i, 0)
        if lift > severity.get(i, 0.0):
            out[i] = round(lift, 4)
    return out


def _order_in_system_logs(parsed: ParsedJob, system: set[int], candidates: set[int]) -> dict[int, int]:
    """Per system-log event: how many new (candidate) lines its file showed before it (the least
    over the files that hold it)."""
    cfg = _config()
    out: dict[int, int] = {}
    for path, pos in parsed.positions.items():
        here = [i for i in system if i in pos]
        if not here:
            continue
        if not cfg["files"].search(PurePath(path).name):
            continue
        firsts = sorted(pos[i][0] for i in pos if i in candidates)
        for i in here:
            before = sum(1 for f in firsts if f < pos[i][0])
            out[i] = min(out.get(i, before), before)
    return out
