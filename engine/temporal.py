"""Temporal comparison: which iteration broke?

Each rank file with iteration markers gives one event sequence per iteration. Every event is
encoded by its surprisal (−log of its share of the job's lines), so rare events weigh more. Each
iteration's sequence is compared with DTW (dtaidistance's C implementation) to the previous
WINDOW iterations; an iteration whose mean distance lies beyond three sigma of the file's
distances is anomalous, with the events it adds to the window.
"""

from __future__ import annotations

import math

import numpy as np
from dtaidistance import dtw

from engine.model import IterationFinding, IterationSeries, ParsedJob

WINDOW = 10
SIGMA = 3.0
SERIES_POINTS = 2000  # plot series are thinned to about this many points


def _require_c() -> None:
    try:
        from dtaidistance import dtw_cc  # noqa: F401  (the C implementation; the Python one is 300x slower)
    except ImportError:
        raise RuntimeError("dtaidistance's C extension is not available; reinstall dtaidistance") from None


def anomalous_iterations(
    parsed: ParsedJob, weight: dict[int, float], top_k: int = 5,
    series: list[IterationSeries] | None = None,
) -> list[IterationFinding]:
    """Anomalous iterations, most anomalous first. `weight`: event id -> how indicative (0..1).
    With `series`, every analysed rank file's distance series is appended to it (for plots)."""
    if not parsed.iterations:
        return []
    _require_c()
    total = max(1, sum(t.count for t in parsed.templates))
    value = np.array([-math.log(max(t.count, 1) / total) for t in parsed.templates], dtype=np.double)
    found: dict[int, IterationFinding] = {}
    for path, its in parsed.iterations.items():
        node = parsed.file_nodes.get(path, "")
        flagged = _file_anomalies(its, value, weight, path, node, series)
        for iteration, score, added in flagged:
            f = found.get(iteration)
            if f is None:
                f = found[iteration] = IterationFinding(iteration=iteration, score=0.0)
            f.score = max(f.score, score)
            if node and node not in f.nodes:
                f.nodes.append(node)
            for e in added:
                t = parsed.templates[e].template
                if t not in f.events:
                    f.events.append(t)
    out = sorted(found.values(), key=lambda f: (-f.score, f.iteration))
    for f in out:
        f.score = round(f.score, 4)
        f.nodes.sort()
        f.events = f.events[:5]
    return out[:top_k]


def _file_anomalies(
    its: list[tuple[int, tuple[int, ...]]], value: np.ndarray, weight: dict[int, float],
    path: str = "", node: str = "", out_series: list[IterationSeries] | None = None,
) -> list[tuple[int, float, list[int]]]:
    if len(its) < 3:
        return []
    series: dict[tuple[int, ...], np.ndarray] = {}
    cache: dict[tuple[int, int], float] = {}
    ids = {}
    for _, seq in its:
        if seq not in ids:
            ids[seq] = len(ids)
            series[seq] = value[list(seq)] if seq else np.zeros(1)
    dists = []
    for k in range(1, len(its)):
        cur = its[k][1]
        window = [its[j][1] for j in range(max(0, k - WINDOW), k)]
        ds = []
        for prev in window:
            a, b = ids[cur], ids[prev]
            key = (a, b) if a <= b else (b, a)
            d = cache.get(key)
            if d is None:
                d = 0.0 if a == b else float(dtw.distance_fast(series[cur], series[prev]))
                cache[key] = d
            ds.append(d)
        dists.append(sum(ds) / len(ds))
    arr = np.array(dists)
    arr[~np.isfinite(arr)] = arr[np.isfinite(arr)].max(initial=0.0) * 2 + 1.0
    dists = arr.tolist()
    mu, sd = float(arr.mean()), float(arr.std())
    sd = max(sd, 1e-6, 0.05 * mu)
    out = []
    for k, d in enumerate(dists, start=1):
        z = (d - mu) / sd
        if z <= SIGMA or d <= 0:
            continue
        cur = its[k][1]
        seen = {e for j in range(max(0, k - WINDOW), k) for e in its[j][1]}
        added = [e for e in dict.fromkeys(cur) if e not in seen]
        relevance = max((weight.get(e, 0.0) for e in added), default=0.0)
        score = (z / (z + SIGMA)) * (0.4 + 0.6 * relevance)
        added.sort(key=lambda e: -weight.get(e, 0.0))
        out.append((its[k][0], score, added))
    if out_series is not None:
        out_series.append(_series(path, node, [it for it, _ in its[1:]], dists, mu, sd, [o[0] for o in out]))
    return out


def _series(path: str, node: str, iterations: list[int], dists: list[float], mu: float, sd: float,
            flagged: list[int]) -> IterationSeries:
    """A plot series, thinned to about SERIES_POINTS points (flagged iterations always kept)."""
    step = max(1, len(iterations) // SERIES_POINTS)
    keep = set(flagged)
    idx = [k for k in range(len(iterations)) if k % step == 0 or iterations[k] in keep]
    return IterationSeries(file=path, node=node, iterations=[iterations[k] for k in idx],
                           distances=[round(dists[k], 4) for k in idx], mean=round(mu, 4), std=round(sd, 4),
                           threshold=round(mu + SIGMA * sd, 4), flagged=sorted(keep))
