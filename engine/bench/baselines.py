"""The baselines the L4 paper compares with, over the same parse of a job, and grep over raw lines.

Each of `BASELINES` returns (events, nodes): events as template ids (ranked), nodes ranked most
suspicious first. `grep_events` reads the job's files itself: what an SRE's first grep shows.
"""
from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from sklearn.decomposition import PCA

from engine.headers import parse_header, timestamp
from engine.ingest import JobSpec, ReadReport, discover, iter_blocks
from engine.masking import mask
from engine.model import ParsedJob

ERROR_LEVELS = {"ERROR", "FATAL"}
RARE_K = 10


def _error_ids(parsed: ParsedJob) -> list[int]:
    return [i for i, t in enumerate(parsed.templates) if t.level in ERROR_LEVELS]


def all_errors(parsed: ParsedJob) -> tuple[list[int], list[str]]:
    """Every error-level event; nodes by their number of error lines."""
    return _error_ids(parsed), error_count(parsed)[1]


def error_time(parsed: ParsedJob) -> tuple[list[int], list[str]]:
    """Error-level events by the time of their first line (unstamped ones after them, in parse
    order); nodes ranked by the time of their first error line (earliest first)."""
    ids = set(_error_ids(parsed))
    firsts = {}
    for node, seen in parsed.node_first_seen.items():
        times = [ts for i, ts in seen.items() if i in ids]
        if times:
            firsts[node] = min(times)
    ranked = sorted(firsts, key=lambda n: (firsts[n], n))
    rest = sorted(n for n in parsed.node_counts if n not in firsts)
    stamped = {i: _instant(parsed.templates[i].first_seen) for i in ids}
    events = sorted(ids, key=lambda i: (stamped[i] is None, stamped[i] or 0.0, i))
    return events, ranked + rest


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


GREP = re.compile(r"error|exception|fail|fatal", re.IGNORECASE)
GREP_EXAMPLES = 3
GREP_ORDERS = ("file", "time")


def _instant(ts: str | None) -> float | None:
    """Seconds since the epoch of an ISO-8601 stamp (naive ones read as UTC), None if unreadable."""
    if not ts:
        return None
    try:
        dt = datetime.fromisoformat(ts)
    except ValueError:
        return None
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def _file_lines(path: str) -> list[str]:
    out: list[str] = []
    for block in iter_blocks(path, ReadReport()):
        out += (ln.decode("utf-8", "replace").rstrip("\r") for ln in block)
    return out


def grep_events(job: JobSpec | Path | str, order: str = "file") -> list[tuple[str, list[str]]]:
    """`grep -iE 'error|exception|fail|fatal'` over every rank file, as events: matching lines
    grouped by their masked message (the "template"), each with its first lines as examples.

    ``file``: rank files in folder order, lines in file order. ``time``: by each line's timestamp
    (an unstamped line takes the stamp of the nearest stamped line before it in its file, else the
    file's first stamp; files without any stamp follow, in file order)."""
    if order not in GREP_ORDERS:
        raise ValueError(f"unknown grep order {order!r} (one of {', '.join(GREP_ORDERS)})")
    spec = job if isinstance(job, JobSpec) else discover(job)
    hits: list[tuple[tuple, str]] = []
    for f_idx, rank_file in enumerate(spec.files):
        lines = _file_lines(rank_file.path)
        stamps = [_instant(timestamp(ln)) for ln in lines] if order == "time" else [None] * len(lines)
        known = [t for t in stamps if t is not None]
        current = known[0] if known else None
        for n, (line, t) in enumerate(zip(lines, stamps, strict=True)):
            current = t if t is not None else current
            if GREP.search(line):
                key = (0, current, f_idx, n) if current is not None else (1, 0.0, f_idx, n)
                hits.append((key, line))
    hits.sort(key=lambda h: h[0])
    events: dict[str, list[str]] = {}
    for _, line in hits:
        examples = events.setdefault(mask(parse_header(line).message), [])
        if len(examples) < GREP_EXAMPLES:
            examples.append(line)
    return list(events.items())
