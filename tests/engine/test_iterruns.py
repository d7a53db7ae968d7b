"""Run-length encoded iterations read exactly like the list of pairs they stand for."""

import random

import numpy as np
import pytest

from engine.iterruns import IterationRuns, RunBuilder

SEQS = [(), (1,), (2, 3)]


def _pairs(rng: random.Random) -> tuple[list[int], list[int]]:
    its, idx, it = [], [], rng.randint(-5, 100)
    shape = rng.random()
    for k in range(rng.randint(0, 80)):
        if shape < 0.3:
            it += k % 2  # two markers per iteration
        elif shape < 0.6:
            it += 1 if rng.random() < 0.9 else rng.randint(-40, 40)  # restarts and jumps
        else:
            it += rng.choice([0, 1, 2, -3])
        its.append(it)
        idx.append(k % 3 if rng.random() < 0.8 else rng.randrange(3))
    return its, idx


@pytest.mark.parametrize("seed", range(200))
def test_round_trip_in_any_blocks(seed):
    rng = random.Random(seed)
    its, idx = _pairs(rng)
    b = RunBuilder()
    k = 0
    while k < len(its):
        step = rng.randint(1, 12)
        b.extend(np.array(its[k:k + step]), np.array(idx[k:k + step]))
        k += step
    runs = IterationRuns(b.runs, SEQS)
    want = [(i, SEQS[s]) for i, s in zip(its, idx, strict=True)]
    assert list(runs) == want and runs == want and len(runs) == len(want)
    assert [runs[j] for j in range(len(want))] == want
    assert runs[-3:] == want[-3:] and runs[::5] == want[::5]
    a, s = runs.arrays()
    assert a.tolist() == its and s.tolist() == idx
    assert runs.max_iteration() == (max(its) if its else None)
    assert IterationRuns.from_pairs(want) == want


def test_steady_training_is_one_run_and_patterns_of_two_are_too():
    b = RunBuilder()
    b.extend(np.arange(1, 100_001), np.zeros(100_000, dtype=np.int64))
    assert len(b.runs) == 1
    b = RunBuilder()
    its = np.repeat(np.arange(1, 50_001), 2)
    for part in np.array_split(np.arange(len(its)), 7):
        b.extend(its[part], part % 2)
    assert len(b.runs) == 1
    runs = IterationRuns(b.runs, [(), (5,)])
    assert runs[0] == (1, ()) and runs[1] == (1, (5,)) and runs[-1] == (50_000, (5,))


def test_index_errors_and_mapping():
    runs = IterationRuns.from_pairs([(3, (1, 2)), (4, (1, 2)), (5, ())])
    with pytest.raises(IndexError):
        runs[3]
    assert runs.map_seqs(lambda s: tuple(x * 10 for x in s)) == [(3, (10, 20)), (4, (10, 20)), (5, ())]
