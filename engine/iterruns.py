"""A rank file's iterations, run-length encoded: memory grows with changes, not with iterations.

Synchronised training repeats the same event sequence iteration after iteration, with iteration
numbers that go up by a constant step; a rank that prints two markers per iteration repeats a
pattern of two. A *run* is a stretch that repeats one short pattern: (first iteration, count,
deltas, sequences), where entry j has sequence `seqs[j % p]` and iteration number
`first + deltas[1 % p] + … + deltas[j % p]` (p = the pattern's length). `IterationRuns` reads like
the plain list of (iteration, sequence) pairs it encodes, and gives the expanded arrays the
temporal analysis needs, one file at a time.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import overload

import numpy as np

Seq = tuple[int, ...]
Run = tuple[int, int, tuple[int, ...], tuple[int, ...]]  # (first iteration, count, deltas, sequence indexes)
MAX_PERIOD = 4


def _run_arrays(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """The iteration numbers and sequence indexes of one run."""
    first, count, deltas, seqs = run
    p = len(seqs)
    if p == 1:
        return first + deltas[0] * np.arange(count, dtype=np.int64), np.full(count, seqs[0], dtype=np.int64)
    j = np.arange(count)
    d = np.asarray(deltas, dtype=np.int64)[j % p]
    d[0] = 0
    return first + np.cumsum(d), np.asarray(seqs, dtype=np.int64)[j % p]


def _run_max(run: Run) -> int:
    """The largest iteration number of one run: entry j + p is entry j moved by sum(deltas)."""
    first, count, deltas, seqs = run
    p = len(seqs)
    head = _run_arrays((first, min(count, p), deltas, seqs))[0]
    if count <= p:
        return int(head.max())
    j = np.arange(count - p, count)
    tail = head[j % p] + (j // p) * sum(deltas)
    return int(max(head.max(), tail.max()))


class RunBuilder:
    """Appends (iteration, sequence index) pairs, a whole array at a time, as runs."""

    def __init__(self) -> None:
        self.runs: list[Run] = []
        self._last_it = 0  # iteration number of the last pair added

    def extend(self, iterations: np.ndarray, seq_idx: np.ndarray) -> None:
        its = np.asarray(iterations, dtype=np.int64)
        sq = np.asarray(seq_idx, dtype=np.int64)
        if not len(its):
            return
        done = self._continue(its, sq)
        its, sq = its[done:], sq[done:]
        m = len(its)
        if not m:
            return
        d = np.empty(m, dtype=np.int64)
        d[0] = its[0] - self._last_it
        d[1:] = np.diff(its)
        best, best_score = 1, -1
        for p in range(1, min(MAX_PERIOD, m - 1) + 1):
            score = int(((d[p:] == d[:-p]) & (sq[p:] == sq[:-p])).sum())
            if score > best_score:
                best, best_score = p, score
        p = best
        ok = np.zeros(m, dtype=bool)
        if m > p:
            ok[p:] = (d[p:] == d[:-p]) & (sq[p:] == sq[:-p])
        breaks = np.flatnonzero(~ok)
        k0 = 0
        while k0 < m:
            i = int(np.searchsorted(breaks, k0 + p))
            k1 = int(breaks[i]) if i < len(breaks) else m
            per = min(p, k1 - k0)
            deltas = [0] * per
            for r in range(1, per):
                deltas[r] = int(d[k0 + r])
            if k0 + per < k1:
                deltas[0] = int(d[k0 + per])
            self.runs.append((int(its[k0]), k1 - k0, tuple(deltas), tuple(sq[k0:k0 + per].tolist())))
            k0 = k1
        self._last_it = int(its[-1])

    def _continue(self, its: np.ndarray, sq: np.ndarray) -> int:
        """How many of the pairs continue the last run's pattern (they are added to it)."""
        if not self.runs:
            return 0
        first, count, deltas, seqs = self.runs[-1]
        p = len(seqs)
        j = count + np.arange(len(its))
        exp_sq = np.asarray(seqs, dtype=np.int64)[j % p]
        exp_it = self._last_it + np.cumsum(np.asarray(deltas, dtype=np.int64)[j % p])
        bad = np.flatnonzero((exp_sq != sq) | (exp_it != its))
        n = int(bad[0]) if len(bad) else len(its)
        if n:
            self.runs[-1] = (first, count + n, deltas, seqs)
            self._last_it = int(its[n - 1])
        return n

    def add(self, iteration: int, seq: int) -> None:
        self.extend(np.array([iteration], dtype=np.int64), np.array([seq], dtype=np.int64))


class IterationRuns(Sequence[tuple[int, Seq]]):
    """(iteration, event-id sequence) pairs of one rank file, stored as runs over distinct sequences."""

    __slots__ = ("seqs", "_runs", "_offsets")

    def __init__(self, runs: Iterable[Run], seqs: Sequence[Seq]) -> None:
        self.seqs: list[Seq] = list(seqs)
        self._runs: list[Run] = list(runs)
        self._offsets = [0]
        for r in self._runs:
            self._offsets.append(self._offsets[-1] + r[1])

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[int, Seq]]) -> IterationRuns:
        index: dict[Seq, int] = {}
        its, idx = [], []
        for it, seq in pairs:
            its.append(it)
            idx.append(index.setdefault(tuple(seq), len(index)))
        b = RunBuilder()
        b.extend(np.array(its, dtype=np.int64), np.array(idx, dtype=np.int64))
        return cls(b.runs, list(index))

    def runs(self) -> list[Run]:
        return list(self._runs)

    def __len__(self) -> int:
        return self._offsets[-1]

    @overload
    def __getitem__(self, k: int) -> tuple[int, Seq]: ...
    @overload
    def __getitem__(self, k: slice) -> list[tuple[int, Seq]]: ...

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        n = len(self)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError("iteration index out of range")
        r = bisect_right(self._offsets, k) - 1
        j = k - self._offsets[r]
        first, _, deltas, seqs = self._runs[r]
        p = len(seqs)
        it = first + (j // p) * sum(deltas) + sum(deltas[1:j % p + 1])
        return it, self.seqs[seqs[j % p]]

    def __iter__(self) -> Iterator[tuple[int, Seq]]:
        for run in self._runs:
            its, idx = _run_arrays(run)
            for it, s in zip(its.tolist(), idx.tolist(), strict=True):
                yield it, self.seqs[s]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(a == tuple(b) for a, b in zip(self, other, strict=False))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"IterationRuns({len(self)} iterations, {len(self._runs)} runs, {len(self.seqs)} sequences)"

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Every iteration number and every sequence index, in file order (int64 arrays)."""
        if not self._runs:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        parts = [_run_arrays(r) for r in self._runs]
        return np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts])

    def max_iteration(self) -> int | None:
        if not self._runs:
            return None
        return max(_run_max(r) for r in self._runs)

    def map_seqs(self, fn: Callable[[Seq], Seq]) -> IterationRuns:
        """The same runs with every distinct sequence passed through `fn`."""
        out = IterationRuns.__new__(IterationRuns)
        out.seqs = [fn(s) for s in self.seqs]
        out._runs, out._offsets = self._runs, self._offsets
        return out
