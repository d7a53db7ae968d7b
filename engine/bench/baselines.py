"""The baselines the L4 paper compares with, over the same parse of a job.

Each returns (events, nodes): events as template ids (ranked), nodes ranked most suspicious first.
"""
from __future__ import annotations

import numpy as np
from sklearn.decomposition import PCA

from engine.model import ParsedJob

ERROR_LEVELS = {"ERROR", "FATAL"}
RARE_K = 10


def _error_ids(parsed: ParsedJob) -> list[int]:
    return [i for i, t in enumerate(parsed.templates) if t.level in ERROR_LEVELS]


def all_errors(parsed: ParsedJob) -> tuple[list[int], list[str]]:
    """Every error-level event; nodes by their number of error lines."""
    return _error_ids(parsed), error_count(parsed)[1]


def error_time(parsed: ParsedJob) -> tuple[list[int], list[str]]:
    """Nodes ranked by the time of their first error line (earliest first)."""
    ids = set(_error_ids(parsed))
    firsts = {}
    for node, seen in parsed.node_first_seen.items():
        times = [ts for i, ts in seen.items() if i in ids]
        if times:
            firsts[node] = min(times)
    ranked = sorted(firsts, key=lambda n: (firsts[n], n))
    rest = sorted(n for n in parsed.node_counts if n not in firsts)
    return sorted(ids), ranked + rest


def error_count(parsed: ParsedJob) -> tuple[list[int], list[str]]:
    """Nodes ranked by their number of error lines (most first)."""
    ids = _error_ids(parsed)
    counts = {n: sum(c.get(i, 0) for i in ids) for n, c in parsed.node_counts.items()}
    return ids, sorted(counts, key=lambda n: (-counts[n], n))


def rare_events(parsed: ParsedJob) -> tuple[list[int], list[str]]:
    """The lowest-frequency events; nodes by how many of those lines they log."""
    order = sorted(range(len(parsed.templates)), key=lambda i: (parsed.templates[i].count, i))[:RARE_K]
    counts = {n: sum(c.get(i, 0) for i in order) for n, c in parsed.node_counts.items()}
    return order, sorted(counts, key=lambda n: (-counts[n], n))


def pca(parsed: ParsedJob) -> tuple[list[int], list[str]]:
    """Xu et al.: PCA over node event-count vectors; nodes by squared prediction error (residual)."""
    nodes = sorted(parsed.node_counts)
    m = len(parsed.templates)
    if len(nodes) < 3 or m == 0:
        return [], nodes
    x = np.log1p(np.array([[parsed.node_counts[n].get(i, 0) for i in range(m)] for n in nodes], dtype=float))
    x -= x.mean(axis=0)
    k = max(1, min(len(nodes) - 1, m) // 2)
    model = PCA(n_components=k, random_state=0).fit(x)
    resid = x - model.inverse_transform(model.transform(x))
    spe = (resid ** 2).sum(axis=1)
    ranked = [nodes[j] for j in np.argsort(-spe, kind="stable")]
    top = nodes.index(ranked[0])
    events = [int(i) for i in np.argsort(-(resid[top] ** 2), kind="stable")[:RARE_K] if resid[top][i] > 0]
    return events, ranked


BASELINES = {
    "all-errors": all_errors,
    "error-time": error_time,
    "error-count": error_count,
    "rare-events": rare_events,
    "pca": pca,
}
