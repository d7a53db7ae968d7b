"""How much a new wave of labelled public cases is worth to the stage model: its learning curve.

Each public wave (its development half: the test halves are never records) is held out in turn; the
model is fitted on the real runs and on `k` of the other public waves, drawn at random (`draws` times
per k, seeded), and the held-out wave is scored the way the shipped combination answers
(`engine.stage_model.combined` with the model file's timeline kind and overrule). The curve, held-out
accuracy against the number of public training cases, says whether more labelled waves can reach a
bar or the features must change: a curve that gains a little per doubling is not closed by collection.
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from engine.bench.stage_learn import Fold, Record, answers_of, fit, settings, wave_folds


@dataclass(frozen=True)
class Point:
    waves: int  # public waves trained on besides the real runs
    train_public: float  # public training cases, on average over the draws
    right: int  # held-out cases answered right, summed over the waves held out and the draws
    scored: int

    @property
    def accuracy(self) -> float:
        return self.right / max(1, self.scored)


def learning_curve(records: Sequence[Record], sizes: Sequence[int] | None = None, draws: int = 3,
                   seed: int = 0, c: float = 1.0, timeline: str = "progress+log+job+init",
                   overrule: str = "frames", conf: dict | None = None) -> list[Point]:
    """The held-out accuracy for each number of public training waves in `sizes` (default: 1, then
    every other one up to all the other waves); a ValueError for fewer than two public waves."""
    from threadpoolctl import threadpool_limits

    conf = conf or settings()
    held_sets = [[records[i] for i in held] for _, held in wave_folds(records)]
    if len(held_sets) < 2:
        raise ValueError(f"a learning curve needs public cases of two waves or more ({len(held_sets)} here)")
    waves = sorted({held[0].wave for held in held_sets})
    most = len(waves) - 1
    sizes = sorted({k for k in (sizes or [*range(1, most, 2), most]) if 1 <= k <= most})
    rng = random.Random(seed)
    out = []
    with threadpool_limits(1):  # small fits: BLAS threads only contend
        for k in sizes:
            right = scored = 0
            public = []
            for held in held_sets:
                others = [w for w in waves if w != held[0].wave]
                for _ in range(draws if k < most else 1):  # all the other waves: one draw is all there is
                    chosen = set(rng.sample(others, k))
                    train = [r for r in records if r.corpus != "public" or r.wave in chosen]
                    public.append(sum(r.corpus == "public" for r in train))
                    model = fit(train, c, conf["min_df"], class_weight=conf.get("class_weight"))
                    fold = Fold(c=c, predictions=[model.predict(r.features) for r in held])
                    answers = answers_of(held, fold, "timeline", timeline, 0.0, "none", 0.0, overrule)
                    right += sum(a == r.stage for a, r in zip(answers, held, strict=True))
                    scored += len(held)
            out.append(Point(waves=k, train_public=sum(public) / len(public), right=right, scored=scored))
    return out


def format_curve(points: Sequence[Point]) -> str:
    rows = ["#### Stage model: held-out public wave accuracy by the public cases trained on", "",
            "| public waves trained on | public training cases (mean) | held-out cases scored | accuracy |",
            "|---|---|---|---|"]
    rows += [f"| {p.waves} | {p.train_public:.0f} | {p.scored} | {p.accuracy:.3f} |" for p in points]
    return "\n".join(rows)
