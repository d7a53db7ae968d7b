"""Temporal comparison: which iteration broke?

Each rank file with iteration markers gives one event sequence per iteration. Every event is
encoded by its surprisal (−log of its share of the job's lines), so rare events weigh more. Each
iteration's sequence is compared with DTW (dtaidistance's C implementation) to the previous
WINDOW iterations; an iteration whose mean distance lies beyond three sigma of the file's
distances is anomalous, with the events it adds to the window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from dtaidistance import dtw

from engine.iterruns import IterationRuns
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
    dtw_pairs = _Distances(value)
    found: dict[int, IterationFinding] = {}
    for path, its in parsed.iterations.items():
        node = parsed.file_nodes.get(path, "")
        flagged = _file_anomalies(its, value, weight, path, node, series, dtw_pairs)
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


class _Distances:
    """DTW distances between event sequences, each distinct pair computed once for the whole job."""

    def __init__(self, value: np.ndarray) -> None:
        self.value = value
        self.ids: dict[tuple[int, ...], int] = {}
        self.series: list[np.ndarray] = []
        self.cache: dict[tuple[int, int], float] = {}

    def id_of(self, seq: tuple[int, ...]) -> int:
        sid = self.ids.get(seq)
        if sid is None:
            sid = self.ids[seq] = len(self.series)
            self.series.append(self.value[list(seq)] if seq else np.zeros(1))
        return sid

    def pairs(self, cur: np.ndarray, prev: np.ndarray) -> np.ndarray:
        """Distances between the sequences `cur[i]` and `prev[i]` (job-wide sequence ids)."""
        out = np.zeros(len(cur))
        diff = np.flatnonzero(cur != prev)
        if not len(diff):
            return out
        lo, hi = np.minimum(cur[diff], prev[diff]), np.maximum(cur[diff], prev[diff])
        keys, inverse = np.unique(lo * len(self.series) + hi, return_inverse=True)
        vals = np.empty(len(keys))
        for k, key in enumerate(keys.tolist()):
            a, b = divmod(key, len(self.series))
            d = self.cache.get((a, b))
            if d is None:
                d = self.cache[(a, b)] = float(dtw.distance_fast(self.series[a], self.series[b]))
            vals[k] = d
        out[diff] = vals[inverse.reshape(-1)]
        return out


def _file_anomalies(
    its: Sequence[tuple[int, tuple[int, ...]]], value: np.ndarray, weight: dict[int, float],
    path: str = "", node: str = "", out_series: list[IterationSeries] | None = None,
    distances: _Distances | None = None,
) -> list[tuple[int, float, list[int]]]:
    if len(its) < 3:
        return []
    runs = its if isinstance(its, IterationRuns) else IterationRuns.from_pairs(its)
    dist = distances or _Distances(value)
    iters, local = runs.arrays()
    sid = np.array([dist.id_of(s) for s in runs.seqs], dtype=np.int64)[local]
    n = len(sid)
    # only iterations within WINDOW of a change of sequence can differ from their window
    change = np.flatnonzero(sid[1:] != sid[:-1]) + 1
    touched = np.zeros(n + WINDOW + 1, dtype=np.int64)
    np.add.at(touched, change, 1)
    np.add.at(touched, change + WINDOW, -1)
    ks = np.flatnonzero(np.cumsum(touched[:n]) > 0)
    ks = ks[ks >= 1]
    sums = np.zeros(len(ks))
    for w in range(WINDOW, 0, -1):  # oldest first, the order a plain sum over the window takes
        ok = ks - w >= 0
        sums[ok] += dist.pairs(sid[ks[ok]], sid[ks[ok] - w])
    arr = np.zeros(n - 1)
    arr[ks - 1] = sums / np.minimum(ks, WINDOW)
    finite = np.isfinite(arr)
    if not finite.all():
        arr[~finite] = arr[finite].max(initial=0.0) * 2 + 1.0
    mu, sd = float(arr.mean()), float(arr.std())
    sd = max(sd, 1e-6, 0.05 * mu)
    z_all = (arr - mu) / sd
    out = []
    for k in (np.flatnonzero((z_all > SIGMA) & (arr > 0)) + 1).tolist():
        d = float(arr[k - 1])
        z = (d - mu) / sd
        cur = runs.seqs[local[k]]
        seen = {e for j in range(max(0, k - WINDOW), k) for e in runs.seqs[local[j]]}
        added = [e for e in dict.fromkeys(cur) if e not in seen]
        relevance = max((weight.get(e, 0.0) for e in added), default=0.0)
        score = (z / (z + SIGMA)) * (0.4 + 0.6 * relevance)
        added.sort(key=lambda e: -weight.get(e, 0.0))
        out.append((int(iters[k]), score, added))
    if out_series is not None:
        out_series.append(_series(path, node, iters[1:], arr, mu, sd, [o[0] for o in out]))
    return out


def _series(path: str, node: str, iterations: np.ndarray, dists: np.ndarray, mu: float, sd: float,
            flagged: list[int]) -> IterationSeries:
    """A plot series, thinned to about SERIES_POINTS points (flagged iterations always kept)."""
    step = max(1, len(iterations) // SERIES_POINTS)
    keep = set(flagged)
    idx = np.flatnonzero((np.arange(len(iterations)) % step == 0) | np.isin(iterations, list(keep)))
    distinct, inverse = np.unique(dists[idx], return_inverse=True)  # few distinct distances: round each once
    rounded = np.array([round(d, 4) for d in distinct.tolist()], dtype=np.double)[inverse.reshape(-1)]
    return IterationSeries(file=path, node=node, iterations=iterations[idx].tolist(),
                           distances=rounded.tolist(), mean=round(mu, 4),
                           std=round(sd, 4), threshold=round(mu + SIGMA * sd, 4), flagged=sorted(keep))
