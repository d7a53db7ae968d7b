"""Learning a root line's severity from labelled cases (`l4 bench root-model severity-cv`).

Every usable development case (`engine.bench.root_learn.usable_cases`, held-out halves skipped) is parsed
once; each of its candidate events is a row (`engine.root_severity.shape` of its template, label: it shows
a root line as `l4 bench eval` counts it). `cross_validate` fits the logistic regression on every group but
one (`--group wave`: a public or real-run wave, an outsider generator, the synthetic generator; `corpus`:
public, realrun, othergen, othergen2, synthetic) and scores the left-out group's cases with the engine's
own `score_events` / `select_events`, the model lifting the candidates it finds likely, against the
lexicon alone: root first, among the first 3, events precision/recall as `l4 bench eval` counts them,
and says whether the best setting would ship (`ship_rule`). None did (README, w8-rootsel): there is no
model file, and the engine scores with the lexicon alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.bench.evaluate import Tally
from engine.bench.root_learn import group_index
from engine.model import ParsedJob
from engine.root_severity import MODEL_VERSION, NO_LIFT, LiftModel, shape

QUIET = 0.6  # engine.events.ROOT_SEVERITY: a line the lexicon weighs less is no root cause in sight


@dataclass
class Case:
    name: str
    corpus: str
    wave: int
    truth: dict
    job: ParsedJob
    candidates: list[int]
    source: str
    labels: dict[int, bool]  # candidate -> it shows a root line
    lexicon: dict[int, float]
    eligible: list[int]  # the candidates a lift may reach (`eligible`)

    @property
    def group(self) -> str:
        return f"{self.corpus} wave {self.wave}" if self.corpus in ("public", "realrun") else self.corpus


def load_case(case: Path, truth: dict) -> Case:
    from engine.bench.evaluate import parse_case, source_group
    from engine.bench.root_learn import corpus_of, root_lines
    from engine.bench.rootcause import shows_root
    from engine.diagnose import score_job
    from engine.severity import severity

    parsed = parse_case(case)
    job = parsed[0]
    _, _, candidates, _ = score_job(job, parsed[1:])
    roots = root_lines(truth)
    labels = {i: shows_root(job.templates[i].template, job.templates[i].examples, roots) for i in candidates}
    lexicon = {i: severity(job.templates[i].template, job.templates[i].level) for i in candidates}
    return Case(case.name, corpus_of(truth), int(truth.get("wave") or 1), truth, job, candidates,
                source_group(truth), labels, lexicon, eligible(job, candidates))


def eligible(job: ParsedJob, candidates: list[int]) -> list[int]:
    """The candidates `score_events` may lift (the rows a model learns from): no role, no damped shape,
    not logged as routine (INFO/DEBUG)."""
    from engine.events import score_events
    from engine.severity import damped

    return [e.id for e in score_events(job, candidates, lift=NO_LIFT)
            if e.role is None and job.templates[e.id].level not in ("INFO", "DEBUG")
            and not damped(job.templates[e.id].template)]


def load_cases(roots: Iterable[Path], on_case: Callable[[str], None] | None = None) -> list[Case]:
    from engine.bench.root_learn import settings, usable_cases
    from engine.bench.stage_learn import extract_each

    return extract_each(usable_cases(roots, settings()["held_out"]), load_case, on_case)


def fit(cases: Sequence[Case], c: float) -> tuple[dict[str, float], float]:
    """Weights and bias of a balanced logistic regression: root line or not, over the eligible candidates
    (`eligible`) the lexicon finds no root cause in (severity below QUIET), where a lift applies."""
    import numpy as np
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression

    rows, ys = [], []
    for case in cases:
        for i in case.eligible:
            if case.lexicon[i] >= QUIET:
                continue
            t = case.job.templates[i]
            rows.append(shape(t.template, t.level, case.lexicon[i]))
            ys.append(int(case.labels[i]))
    if len(set(ys)) < 2:
        return {}, -30.0
    vec = DictVectorizer()
    x = vec.fit_transform(rows)
    lr = LogisticRegression(C=c, max_iter=5000, class_weight="balanced")
    lr.fit(x, np.array(ys))
    weights = {k: round(float(w), 5) for k, w in zip(vec.feature_names_, lr.coef_[0], strict=True)
               if abs(w) >= 1e-4}
    return weights, round(float(lr.intercept_[0]), 5)


@dataclass
class Outcome:
    rank: int | None  # of the first event showing a root line among the selected ones
    events: list[list[str]]  # the selected events' example lines (for events precision / recall)


def outcome(case: Case, model: LiftModel) -> Outcome:
    from engine.bench.root_learn import root_lines
    from engine.bench.rootcause import root_rank
    from engine.events import score_events, select_events

    selected = select_events(score_events(case.job, case.candidates, lift=model))
    shown = []
    for e in selected:
        t = case.job.templates[e.id]
        shown.append((t.template, list(dict.fromkeys([*e.evidence, *t.examples]))[:3]))
    return Outcome(root_rank(shown, root_lines(case.truth)), [ex for _, ex in shown])


@dataclass(frozen=True)
class Config:
    c: float
    threshold: float
    lift: float

    @property
    def name(self) -> str:
        return f"C={self.c:g} p>={self.threshold:g} lift={self.lift:g}"


def configs(conf: dict) -> list[Config]:
    return [Config(float(c), float(t), float(s)) for c in conf["C"] for t in conf["threshold"]
            for s in conf["lift"]]


@dataclass
class CvResult:
    group: str
    cases: list[Case]
    base: list[Outcome]
    tried: dict[Config, list[Outcome]]
    best: Config


def figures(cases: Sequence[Case], outs: Sequence[Outcome], idx: Sequence[int]) -> dict[str, float]:
    tally = Tally()
    for i in idx:
        tally.add_root(outs[i].rank)
        if cases[i].truth.get("indicating") is not None:
            tally.add_events(outs[i].events, cases[i].truth)
    return {"first": tally.root_first, "top": tally.root_top, "cases": len(idx), "tp": tally.tp,
            "fp": tally.fp, "p": tally.precision, "r": tally.recall, "f1": tally.f1}


def cross_validate(cases: Sequence[Case], conf: dict, group: str = "wave") -> CvResult:
    """Leave-one-`group`-out: every setting of `conf` (C, threshold, lift); the best by the pooled
    left-out root first, then among the first 3, then events F1."""
    from threadpoolctl import threadpool_limits

    cases = list(cases)
    by = group_index(cases, group)[0]
    if len(by) < 2:
        raise ValueError(f"leave-one-{group}-out needs two groups or more ({len(by)} here)")
    base = [outcome(case, NO_LIFT) for case in cases]
    tried: dict[Config, list[Outcome | None]] = {cfg: [None] * len(cases) for cfg in configs(conf)}
    with threadpool_limits(1):
        for c in sorted({cfg.c for cfg in tried}):
            for held in by.values():
                weights, bias = fit([cases[n] for n in range(len(cases)) if n not in set(held)], c)
                for cfg in (cfg for cfg in tried if cfg.c == c):
                    model = LiftModel(MODEL_VERSION, weights, bias, cfg.threshold, cfg.lift)
                    for n in held:
                        tried[cfg][n] = outcome(cases[n], model)
    every = range(len(cases))

    def utility(cfg: Config) -> tuple:
        f = figures(cases, tried[cfg], every)
        return f["first"], f["top"], round(f["f1"], 4)

    best = max(tried, key=utility)
    return CvResult(group, cases, base, tried, best)  # type: ignore[arg-type]


def ship_rule(res: CvResult) -> tuple[bool, str]:
    """The best setting ships when, left out, it puts more roots first than the lexicon alone pooled
    over every group, no group loses a root first or among the first 3, and the events F1 pooled does
    not fall."""
    every = range(len(res.cases))
    base, best = figures(res.cases, res.base, every), figures(res.cases, res.tried[res.best], every)
    gain = best["first"] - base["first"]
    if gain <= 0:
        return False, f"root first {gain:+d} cases pooled"
    for g, idx in sorted(group_index(res.cases, res.group)[0].items()):
        b, a = figures(res.cases, res.base, idx), figures(res.cases, res.tried[res.best], idx)
        if a["first"] < b["first"] or a["top"] < b["top"]:
            return False, f"root first {gain:+d} pooled, but {g} loses ({b['first']}→{a['first']} first)"
    if best["f1"] < base["f1"] - 1e-9:
        return False, f"root first {gain:+d}, but events F1 {base['f1']:.3f} → {best['f1']:.3f}"
    return True, (f"root first {gain:+d} cases pooled, no group worse, "
                  f"events F1 {base['f1']:.3f} → {best['f1']:.3f}")


def format_cv(res: CvResult) -> str:
    by, pooled = group_index(res.cases, res.group)
    out = [f"#### Learned root severity by leave-one-{res.group}-out cross-validation ({res.best.name})", "",
           "| left-out group | cases | root first | root top-3 | events P | events R | events F1 |",
           "|---|---|---|---|---|---|---|"]
    for g, idx in [*sorted(by.items()), *sorted(pooled.items()), ("**all**", list(range(len(res.cases))))]:
        b, a = figures(res.cases, res.base, idx), figures(res.cases, res.tried[res.best], idx)
        n = len(idx)
        out.append(f"| {g} | {n} | {b['first'] / n:.2f} → {a['first'] / n:.2f} "
                   f"({b['first']} → {a['first']}) | "
                   f"{b['top'] / n:.2f} → {a['top'] / n:.2f} | {b['p']:.2f} → {a['p']:.2f} | "
                   f"{b['r']:.2f} → {a['r']:.2f} | {b['f1']:.2f} → {a['f1']:.2f} |")
    ok, why = ship_rule(res)
    out += ["", f"Ships: {'yes' if ok else 'no'} ({why}).", "",
            "Every setting, left out, pooled: root first, top-3, events F1 (lexicon alone first):", "",
            "| setting | root first | root top-3 | events F1 | cases changed |", "|---|---|---|---|---|"]
    every = list(range(len(res.cases)))
    b = figures(res.cases, res.base, every)
    out.append(f"| lexicon alone | {b['first']} | {b['top']} | {b['f1']:.3f} | – |")
    for cfg, outs in res.tried.items():
        a = figures(res.cases, outs, every)
        changed = sum(o.rank != x.rank for o, x in zip(outs, res.base, strict=True))
        out.append(f"| {cfg.name} | {a['first']} | {a['top']} | {a['f1']:.3f} | {changed} |")
    moved = [(res.cases[n].name, res.base[n].rank, o.rank) for n, o in enumerate(res.tried[res.best])
             if o.rank != res.base[n].rank]
    if moved:
        out += ["", "Cases whose root rank the chosen setting changes (left out): "
                + ", ".join(f"`{name}` {b or '–'} → {a or '–'}" for name, b, a in moved)]
    return "\n".join(out)
