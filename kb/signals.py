"""Signal patterns: faults recognised from the engine's per-node findings rather than a line.

A node that hangs or dies often prints nothing: the evidence is that every other node reports a
collective timeout or a lost peer while it does not, or that it fell silent or behind in
iterations. The signals and their thresholds are data (``kb/data/signals.yaml``); this module
evaluates them on a parsed job (``engine.model.ParsedJob``: per-node last timestamp and last
iteration, templates with the nodes that logged them) and the line matcher (which nodes each line
pattern fired on). A signal match is an ``engine.model.Match`` whose evidence names the node, its
seconds of silence and iterations behind, and the timeouts that name it.
"""
from __future__ import annotations

import functools
import os
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from typing import Any

import yaml

from engine.clock import clock_notes
from engine.model import CATEGORIES, Match, ParsedJob, TemplateStat
from kb import KbError

_CONDITIONS = {"lone_node", "all_nodes", "behind_iterations", "min_peer_fraction", "min_nodes",
               "no_line_root", "max_behind", "fewest_peer_lines", "no_own_root", "no_partial_errors"}
MAX_TIMEOUT_EVIDENCE = 2


@functools.lru_cache(maxsize=1)
def load_signals() -> dict[str, Any]:
    """The signal definitions (validated); KbError names the first problem."""
    text = resources.files("kb").joinpath("data/signals.yaml").read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict) or not isinstance(doc.get("signals"), list):
        raise KbError("data/signals.yaml: needs a 'signals' list")
    for s in doc["signals"]:
        where = f"data/signals.yaml: {s.get('id')!r}"
        if s.get("category") not in CATEGORIES or s.get("kind") not in ("root", "cascade"):
            raise KbError(f"{where}: bad category or kind")
        unknown = set(s.get("when") or {}) - _CONDITIONS
        if not s.get("when") or unknown:
            raise KbError(f"{where}: 'when' needs conditions from {sorted(_CONDITIONS)}; "
                          f"unknown {sorted(unknown)}")
    if not isinstance(doc.get("peer_patterns"), list) or not doc["peer_patterns"]:
        raise KbError("data/signals.yaml: needs peer_patterns")
    return doc


@functools.lru_cache(maxsize=1)
def _exception_res() -> list[re.Pattern[str]]:
    return [re.compile(p) for p in load_signals().get("exception_lines") or []]


def _named(pattern_id: str, names: tuple[str, ...]) -> bool:
    """Whether an id is one of `names` (an id, or a prefix ending in ``*``)."""
    return any(pattern_id == n or (n.endswith("*") and pattern_id.startswith(n[:-1])) for n in names)


def _exception_line(line: str) -> bool:
    return any(r.search(line) for r in _exception_res())


def _ts(value: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(value[:26]) if value else None
    except ValueError:
        return None


@dataclass
class JobFindings:
    """What the signals read from one job."""

    nodes: list[str]
    peer_nodes: set[str] = field(default_factory=set)  # nodes where a peer-failure pattern fired
    peer_lines: list[str] = field(default_factory=list)  # example timeout / lost-peer lines
    silence: dict[str, float] = field(default_factory=dict)  # node -> seconds before the job's last line
    behind: dict[str, int] = field(default_factory=dict)  # node -> iterations its slowest rank file is behind
    lagging: dict[str, list[str]] = field(default_factory=dict)  # node -> its rank files behind by >= 1
    last_iter: dict[str, int] = field(default_factory=dict)  # node -> its slowest rank file's last iteration
    median_iter: float | None = None  # the job's median last iteration (over rank files, else nodes)
    line_roots: set[str] = field(default_factory=set)  # root-kind line patterns that fired anywhere
    root_nodes: set[str] = field(default_factory=set)  # nodes where a root-kind line pattern fired
    peer_counts: dict[str, int] = field(default_factory=dict)  # node -> lines of the widest timeout event
    partial_errors: list[str] = field(default_factory=list)  # unknown error events on some nodes only


def findings(parsed: ParsedJob, matcher: Any, templates: Sequence[TemplateStat] | None = None) -> JobFindings:
    """Per-node silence and lag, and where the peer-failure line patterns fired."""
    peers = set(load_signals()["peer_patterns"])
    ignore = tuple(load_signals().get("own_root_ignore") or ())
    nodes = sorted(parsed.node_counts)
    out = JobFindings(nodes=nodes)
    for t in templates if templates is not None else parsed.templates:
        for line in t.examples or [t.template]:
            found = matcher.scan(line)
            if not found and len(t.nodes) < len(nodes) and t.template not in out.partial_errors \
                    and _exception_line(line):
                out.partial_errors.append(t.template)
            roots = {matcher.patterns[i].id for i in found if matcher.patterns[i].kind == "root"}
            out.line_roots.update(roots)
            if any(not _named(r, ignore) for r in roots):
                out.root_nodes.update(t.nodes)
            hit = {matcher.patterns[i].id for i in found}
            if hit & peers:
                out.peer_nodes.update(t.nodes)
                widest = (len(out.peer_counts), sum(out.peer_counts.values()))
                if (len(t.nodes), sum(t.nodes.values())) > widest:
                    out.peer_counts = dict(t.nodes)  # the timeout most nodes logged, counted per node
                if len(out.peer_lines) < MAX_TIMEOUT_EVIDENCE and line not in out.peer_lines:
                    out.peer_lines.append(line)
                break
    out.silence = _silence(parsed, nodes)
    _lag(parsed, nodes, out)
    return out


def _silence(parsed: ParsedJob, nodes: list[str]) -> dict[str, float]:
    """Seconds between each node's last stamped line and the job's, on clocks corrected by the
    steady offsets `engine.clock` finds (a node logging in another time zone is not silent)."""
    skew = {c.node: c.seconds for c in clock_notes(parsed) if c.kind == "skew"}
    times = {n: _ts(parsed.node_last_ts.get(n)) for n in nodes}
    known = {n: t.timestamp() - skew.get(n, 0.0) for n, t in times.items() if t is not None}
    if len(known) < 2:
        return {}
    latest = max(known.values())
    return {n: latest - t for n, t in known.items()}


def _lag(parsed: ParsedJob, nodes: list[str], out: JobFindings) -> None:
    """Iterations behind the median, per rank file when the job has them (one slow rank among
    healthy ones on its node is seen), else per node."""
    files = {path: seq[-1][0] for path, seq in parsed.iterations.items()
             if len(seq) and parsed.file_nodes.get(path) in parsed.node_counts}
    if len(files) >= 2:
        median = statistics.median(files.values())
        for path, it in files.items():
            node = parsed.file_nodes[path]
            gap = int(median - it)
            if gap > out.behind.get(node, -1):
                out.behind[node], out.last_iter[node] = gap, it
            if gap >= 1:
                out.lagging.setdefault(node, []).append(os.path.basename(path))
    else:
        iters = {n: parsed.node_last_iter[n] for n in nodes if n in parsed.node_last_iter}
        if len(iters) < 2:
            return
        median = statistics.median(iters.values())
        out.behind = {n: int(median - i) for n, i in iters.items()}
        out.last_iter = dict(iters)
    out.median_iter = median


def _evidence(f: JobFindings, node: str | None, limit: float) -> list[str]:
    lines = []
    if node is not None:
        parts = [f"node {node}"]
        if node in f.silence:
            parts.append(f"silent {f.silence[node]:.0f} s before the job's last line"
                         if f.silence[node] >= limit else "kept logging to the end")
        if f.behind.get(node, 0) > 0:
            files = sorted(f.lagging.get(node, []))
            which = f" ({', '.join(files[:3])}{', ...' if len(files) > 3 else ''})" if files else ""
            parts.append(f"{f.behind[node]} iteration(s) behind the others{which}: last iteration "
                         f"{f.last_iter[node]}, median {f.median_iter:g}")
        if node not in f.peer_nodes:
            parts.append("reported no timeout itself")
        elif 0 < f.peer_counts.get(node, 0) < min((c for n, c in f.peer_counts.items() if n != node),
                                                  default=0):
            others = sorted({c for n, c in f.peer_counts.items() if n != node})
            parts.append(f"logged {f.peer_counts[node]} timeout line(s), each other node "
                         f"{'/'.join(map(str, others))}: one of its ranks stopped without one")
        lines.append("; ".join(parts))
    peers = len(f.peer_nodes - ({node} if node else set()))
    lines.append(f"{peers} of {len(f.nodes) - (1 if node else 0)} other node(s) report a timeout or lost peer"
                 if node else f"all {peers} node(s) report a timeout or lost peer")
    return lines + [f"timeout: {line}" for line in f.peer_lines]


def _suspect(f: JobFindings, when: dict[str, Any], limit: float) -> tuple[bool, str | None]:
    """Whether one signal's conditions hold, and the node it names (None for job-wide signals)."""
    n = len(f.nodes)
    if n < when.get("min_nodes", 2) or not f.peer_nodes:
        return False, None
    if when.get("no_line_root") and f.line_roots:
        return False, None
    if when.get("no_partial_errors") and f.partial_errors:
        return False, None  # an error no pattern knows, on some nodes only: something happened there
    if when.get("all_nodes"):
        lag = when.get("max_behind", 1)
        quiet = [x for x in f.nodes if f.silence.get(x, 0.0) >= limit or f.behind.get(x, 0) > lag]
        return set(f.nodes) <= f.peer_nodes and not quiet, None
    need = when.get("min_peer_fraction", 0.8)
    if when.get("lone_node"):
        missing = [x for x in f.nodes if x not in f.peer_nodes]
        if len(missing) != 1 or (when.get("no_own_root") and missing[0] in f.root_nodes):
            return False, None
        return (n - 1) and len(f.peer_nodes) / (n - 1) >= need, missing[0]
    if when.get("fewest_peer_lines"):
        # every node reports, one node fewer lines than all the others (which agree): one of its
        # ranks is the one that stopped or fell behind without a timeout of its own
        counts = {x: f.peer_counts.get(x, 0) for x in f.nodes}
        low = min(counts.values())
        lows = [x for x in f.nodes if counts[x] == low]
        others = {counts[x] for x in f.nodes if x not in lows}
        if len(lows) != 1 or len(others) != 1 or not 0 < low < min(others):
            return False, None
        if when.get("no_own_root") and lows[0] in f.root_nodes:
            return False, None
        return True, lows[0]
    if "behind_iterations" in when:
        # its own lines after the stall (a lost peer, the launcher) often carry no stamp, so a
        # straggler may look silent: being behind is what names it
        slow = [x for x in f.nodes if f.behind.get(x, 0) >= when["behind_iterations"]]
        if len(slow) != 1:
            return False, None
        others = set(f.nodes) - {slow[0]}
        return len(f.peer_nodes & others) / len(others) >= need, slow[0]
    return False, None


def match_signals(parsed: ParsedJob, matcher: Any,
                  templates: Sequence[TemplateStat] | None = None) -> list[Match]:
    """The signal patterns that hold for a parsed job, most specific first (a named node before a
    job-wide signal). ``templates``: the events to read (default: all of the job's)."""
    doc = load_signals()
    limit = float(doc.get("silence_seconds", 30))
    f = findings(parsed, matcher, templates)
    out: list[tuple[int, Match]] = []
    for s in doc["signals"]:
        ok, node = _suspect(f, s["when"], limit)
        if ok:
            out.append((0 if node else 1, Match(
                pattern_id=s["id"], title=s["title"] + (f": {node}" if node else ""), category=s["category"],
                remediation=" ".join(str(s.get("remediation", "")).split()),
                evidence=_evidence(f, node, limit), kind=s["kind"])))
    if any(named == 0 for named, _ in out):  # a node is to blame: not "every rank and none silent"
        out = [x for x in out if x[0] == 0]
    seen: set[str] = set()
    kept = []
    for _, m in sorted(out, key=lambda x: x[0]):
        node = m.evidence[0] if m.evidence and m.evidence[0].startswith("node ") else None
        if node is None or node not in seen:  # one signal per node: the first (data order) says it
            kept.append(m)
            seen.add(node or "")
    return kept


def suspect_node(matches: Iterable[Match]) -> str | None:
    """The node a list of signal matches names first (``node X; ...`` evidence), if any."""
    for m in matches:
        if m.pattern_id.startswith("signal-") and m.evidence and m.evidence[0].startswith("node "):
            return m.evidence[0].split(";")[0][len("node "):]
    return None
