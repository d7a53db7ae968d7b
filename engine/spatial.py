"""Spatial comparison: which node behaves unlike the others?

Signals, each in [0, 1]: an Isolation Forest over per-node event-count vectors (log-scaled); the
evidence of the failure-indicating events a node logs alone or with few others; and *silence*: a
hung or crashed node stops logging first, or falls behind in iterations, while healthy nodes go on
to log timeouts about it (and so lack the cascade everyone else shows); and *peer blame*: the
node whose rank the others' timeouts name, whose host a possible root cause on another node names
("ssh: connect to host X … timed out"), or whose launcher had to kill a worker that ignored its
SIGTERM (`engine.peers`).

Echoes (cascades, the launcher's summaries, wrappers, context) count ECHO_WEIGHT of their score as
evidence for the nodes that log them when a possible root cause was selected too (a cascade
nearly everywhere still points at the nodes without it): the store host's teardown errors and a
peer's closed connection say little about where the fault is. An event shown with evidence lines
from some nodes (the launcher block of a rank killed first) points at those nodes only. A node
whose clock runs a steady offset (`engine.clock`) has its last stamp moved back by it before
silences are compared; nodes that write naive stamps each in their own zone are moved onto one
timeline by whole quarter hours (`zone_offsets`), and a job whose node mixes two zones in its files
gives no stopped-first signal at all (a wrong timeline would name whichever node's zone is west).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

from engine.clock import reference_node
from engine.events import ROOT_SEVERITY, ScoredEvent
from engine.model import ClockNote, NodeFinding, ParsedJob
from engine.peers import blamed_nodes, named_hosts, unresponsive_nodes
from engine.roles import REPORT

SILENCE_MIN_SECONDS = 30.0
ZONE_QUANTUM = 900.0  # time zones differ by whole quarter hours
WEIGHTS = {"forest": 0.2, "evidence": 0.5, "silence": 0.3, "blame": 0.5}
ECHO_WEIGHT = 0.35


def isolation_forest() -> type:
    """scikit-learn's IsolationForest, imported on first use: scikit-learn (with scipy) takes ~2 s
    to import, and a job of fewer than three nodes (a pasted excerpt, one rank file) never needs it.
    A fixed cost per process, not per MB: `l4 bench speed` times this call apart, with the imports."""
    from sklearn.ensemble import IsolationForest

    return IsolationForest


def _forest(parsed: ParsedJob, nodes: list[str], ids: list[int]) -> np.ndarray:
    if len(nodes) < 3 or not ids:
        return np.zeros(len(nodes))
    x = np.array([[parsed.node_counts[n].get(i, 0) for i in ids] for n in nodes], dtype=float)
    x = np.log1p(x)
    forest = isolation_forest()(n_estimators=200, random_state=0).fit(x)
    raw = -forest.score_samples(x)
    span = raw.max() - raw.min()
    return (raw - raw.min()) / span if span > 1e-12 else np.zeros(len(nodes))


def _evidence(parsed: ParsedJob, nodes: list[str], selected: list[ScoredEvent]) -> np.ndarray:
    """Per node: the selected events it logs, each shared among the nodes that log it."""
    ev = np.zeros(len(nodes))
    index = {n: k for k, n in enumerate(nodes)}
    n_nodes = len(nodes)
    rooted = any(e.role in (None, REPORT) and e.severity >= ROOT_SEVERITY for e in selected)
    for e in selected:
        present = [n for n in (e.evidence_nodes or parsed.templates[e.id].nodes) if n in index]
        if not present:
            continue
        score = e.score * (ECHO_WEIGHT if rooted and e.role not in (None, REPORT) else 1.0)
        if e.cascade and n_nodes > 2 and len(present) >= n_nodes - max(1, n_nodes // 4):
            # a cascade nearly everywhere: the nodes *without* it are the odd ones out
            for n in nodes:
                if n not in present:
                    ev[index[n]] += e.score * 0.5
            continue
        share = score / len(present) if len(present) > 1 else score
        for n in present:
            ev[index[n]] += share
    top = ev.max() if len(ev) else 0
    return ev / top if top > 0 else ev


def _parse_ts(ts: str) -> datetime | None:
    try:
        return datetime.fromisoformat(ts[:26])
    except ValueError:
        return None


def zone_offsets(parsed: ParsedJob, nodes: list[str]) -> dict[str, float] | None:
    """Node -> how far its stamps run ahead of a reference node's, in whole quarter hours (seconds):
    naive stamps written in each node's own zone. Read from the events both nodes log (their first
    stamps' difference, rounded to the quarter hour: a launch or a hang is off by seconds, a zone by
    hours). The reference is the node that shares the most events with the others. None when a
    node's events disagree on its offset (its files mix stamps of two zones: its lines cannot be put
    on one timeline); nodes that share no event with the reference are left out."""
    seen = {n: parsed.node_first_seen.get(n, {}) for n in nodes}
    seen = {n: s for n, s in seen.items() if s}
    if len(seen) < 2:
        return {}
    ref = reference_node(seen)
    out: dict[str, float] = {ref: 0.0}
    for n in seen:
        pairs = [(_parse_ts(seen[n][i]), _parse_ts(seen[ref][i])) for i in seen[n].keys() & seen[ref].keys()]
        quarters = {round((a - b).total_seconds() / ZONE_QUANTUM) for a, b in pairs if a and b}
        if len(quarters) > 1:
            return None
        if quarters:
            out[n] = quarters.pop() * ZONE_QUANTUM
    return out


def _silence(parsed: ParsedJob, nodes: list[str], clock: list[ClockNote] = ()) -> np.ndarray:
    out = np.zeros(len(nodes))
    skew = {c.node: c.seconds for c in clock if c.kind == "skew"}
    zones = zone_offsets(parsed, nodes)
    if zones:  # a zone's offset holds the node's skew: the skew corrects only nodes in the reference's zone
        skew = {n: s for n, s in skew.items() if not zones.get(n)} | {n: z for n, z in zones.items() if z}
    times = [_parse_ts(parsed.node_last_ts[n]) if n in parsed.node_last_ts else None for n in nodes]
    times = [t - timedelta(seconds=skew[n]) if t is not None and n in skew else t
             for t, n in zip(times, nodes, strict=True)]
    if zones:  # nodes that share no event with the reference cannot be placed on its timeline
        times = [t if n in zones else None for t, n in zip(times, nodes, strict=True)]
    known = [t for t in times if t is not None]
    if zones is not None and len(known) >= 2:
        latest = max(known)
        lags = np.array([(latest - t).total_seconds() if t else 0.0 for t in times])
        if lags.max() >= SILENCE_MIN_SECONDS:
            out = np.maximum(out, lags / lags.max())
    iters = [parsed.node_last_iter.get(n) for n in nodes]
    known_i = [i for i in iters if i is not None]
    if len(known_i) >= 2 and max(known_i) > min(known_i):
        top = max(known_i)
        behind = np.array([(top - i) if i is not None else 0 for i in iters], dtype=float)
        out = np.maximum(out, behind / behind.max())
    return out


def rank_nodes(
    parsed: ParsedJob,
    candidates: list[int],
    scored: list[ScoredEvent],
    selected: list[ScoredEvent],
    top_k: int = 5,
    all_scores: dict[str, float] | None = None,
    clock: list[ClockNote] = (),
) -> list[NodeFinding]:
    """Suspicious nodes, most suspicious first, each with the events that make it stand out.
    With `all_scores`, every node's combined score is written into it (for plots); `clock`: the
    job's clock notes (skewed nodes' stamps are corrected before silences are compared)."""
    nodes = sorted(parsed.node_counts)
    if not nodes:
        return []
    ids = candidates or list(range(len(parsed.templates)))
    forest = _forest(parsed, nodes, ids)
    evidence = _evidence(parsed, nodes, selected)
    silence = _silence(parsed, nodes, clock)
    blamed = blamed_nodes(parsed, [e.id for e in selected])
    for node, b in unresponsive_nodes(parsed, ids).items():
        blamed[node] = max(blamed.get(node, 0.0), b)
    causes = [e.id for e in selected if not e.cascade and e.role is None and e.severity >= ROOT_SEVERITY]
    for node, b in named_hosts(parsed, causes).items():
        blamed[node] = max(blamed.get(node, 0.0), b)
    blame = np.array([blamed.get(n, 0.0) for n in nodes])
    total = (WEIGHTS["forest"] * forest + WEIGHTS["evidence"] * evidence + WEIGHTS["silence"] * silence
             + WEIGHTS["blame"] * blame)
    score_of = {e.id: e.score for e in scored}
    order = sorted(range(len(nodes)), key=lambda k: (-total[k], nodes[k]))
    if all_scores is not None:
        all_scores.update({nodes[k]: round(float(min(1.0, total[k])), 4) for k in order})
    findings = []
    for k in order[:top_k]:
        node = nodes[k]
        counts = parsed.node_counts[node]
        attributed = _attribute(parsed, nodes, node, counts, ids, score_of)
        findings.append(NodeFinding(node=node, score=round(float(min(1.0, total[k])), 4), events=attributed))
    return findings


def _attribute(
    parsed: ParsedJob,
    nodes: list[str],
    node: str,
    counts: dict[int, int],
    ids: list[int],
    score_of: dict[int, float],
    limit: int = 5,
) -> list[str]:
    """Events whose count on `node` departs most from the other nodes' median, weighted by score."""
    others = [n for n in nodes if n != node]
    weighted = []
    for i in ids:
        mine = counts.get(i, 0)
        if not mine or i not in score_of:
            continue
        med = float(np.median([parsed.node_counts[n].get(i, 0) for n in others])) if others else 0.0
        dev = abs(np.log1p(mine) - np.log1p(med))
        if dev > 0:
            weighted.append((dev * score_of[i], i))
    weighted.sort(reverse=True)
    return [parsed.templates[i].template for _, i in weighted[:limit]]
