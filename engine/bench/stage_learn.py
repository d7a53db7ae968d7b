"""Learning the stage model from labelled cases (`l4 bench stage-model extract|cv|train`).

`extract` runs the engine on every usable case (truth.json with a stage and a `source`; the held-out
test halves of data/stage_learn.yaml and the synthetic generator's cases are skipped) and keeps, per
case, the features of the failure (`engine.stage_model.features`), the rule stage and the failing
rank's timeline. `cv` scores the rules, the model alone and their combinations by leave-one-source-out
cross-validation (a source is the repository or thread family, truth `source` up to its "#", or a
real-run program style, so no two cases of one source sit on both sides of a split) or by
leave-one-public-wave-out (`--group wave`: one public wave held out whole, the estimator of a new
wave). `train` picks the regularisation, the combination and the `unknown` threshold by the grouping
data/stage_learn.yaml `select_by` names, fits the model on every case and writes it as readable JSON
(engine/data/stage_model.json).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from engine.bench.evaluate import case_dirs, diagnose_case, source_group
from engine.bench.held_out import corpus_of, held_out  # noqa: F401 - corpus_of: this module's API
from engine.model import LABELLED_STAGES
from engine.stage_model import (
    UNDER_WAY,
    UNKNOWN,
    Evidence,
    StageModel,
    combined,
    evidence_from_dict,
    failure_evidence,
    fallback_stage,
    features,
    overrule_stage,
    own_words,
    scaled_features,
    timeline_stage,
    under_way_stage,
)

R = TypeVar("R")
MODEL_VERSION = 1
STAGES = LABELLED_STAGES
DATA = Path(__file__).parent / "data" / "stage_learn.yaml"


def settings() -> dict:
    import yaml

    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or "version" not in data:
        raise ValueError(f"{DATA} has no version")
    return data


@dataclass
class Record:
    case: str
    source: str
    stage: str  # the label
    rule: str  # the rule stage (engine.stage.rule_stage)
    evidence: Evidence | None  # None: no rank file showed the first event
    wave: int = 1  # the collection wave of its corpus (truth `wave`; the first wave has none)
    split: str = ""  # truth `split`: dev or test
    features: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.features = features(self.evidence) if self.evidence is not None else set()

    @property
    def timeline(self) -> dict[str, str | None]:
        return self.evidence.timeline if self.evidence is not None else {"progress": None, "log": None}

    @property
    def corpus(self) -> str:
        return "realrun" if self.source.startswith("realrun/") else "public"

    def to_dict(self) -> dict:
        return {"case": self.case, "source": self.source, "stage": self.stage, "rule": self.rule,
                "wave": self.wave, "split": self.split,
                "evidence": self.evidence.to_dict() if self.evidence is not None else None}


def usable_cases(roots: Iterable[Path], rules: Sequence[dict]) -> list[tuple[Path, dict]]:
    """(case folder, truth) of the labelled real cases under `roots`, each once, held-out halves and
    cases without a source (the synthetic generator's) left out."""
    return [(case, truth) for case, truth in each_case(roots)
            if not held_out(truth, rules) and truth.get("source") and truth.get("stage") in STAGES]


def each_case(roots: Iterable[Path]) -> Iterator[tuple[Path, dict]]:
    """(case folder, truth) of every case under `roots`, each once (views of one case are one case)."""
    seen: set[Path] = set()
    for root in roots:
        for case in case_dirs(Path(root)):
            real = case.resolve()
            if real not in seen:
                seen.add(real)
                yield case, json.loads((case / "truth.json").read_text())


def extract_case(case: Path, truth: dict, known: Sequence = ()) -> Record:
    """Run the engine on one case and keep what the model and the combinations read. `known`: the fault
    library's signatures (`engine.known.KnownSignature`), read as ranking evidence as `l4 bench eval` and
    `l4 diagnose` read them, so that a record holds the failing line the shipped engine finds."""
    from engine.stage import rule_stage

    parsed, diagnosis = diagnose_case(case, known)
    ids, trusted = stage_inputs(parsed[0], diagnosis)
    rule = rule_stage(parsed[0], ids, trust_time=trusted)
    return Record(case=case.name, source=source_group(truth), stage=truth["stage"], rule=rule,
                  evidence=failure_evidence(parsed[0], ids, trust_time=trusted),
                  wave=int(truth.get("wave") or 1), split=str(truth.get("split") or ""))


def stage_inputs(parsed, diagnosis) -> tuple[list[int], bool]:
    """The event ids of `diagnosis` in `parsed`, and whether its timeline is trusted, as `analyze`
    hands them to the stage (a `zone` clock note leaves the timeline trusted)."""
    from engine.clock import timeline_trusted

    return event_ids(parsed, [e.template for e in diagnosis.events]), timeline_trusted(diagnosis.clock)


def event_ids(parsed, templates: Sequence[str]) -> list[int]:
    """The event ids of a diagnosis's events (by their templates, in order)."""
    index: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(parsed.templates):
        index[t.template].append(i)
    return [index[t].pop(0) for t in templates if index.get(t)]


def extract(roots: Iterable[Path], on_case: Callable[[str], None] | None = None,
            known: Sequence = ()) -> list[Record]:
    return extract_each(usable_cases(roots, settings()["held_out"]),
                        lambda case, truth: extract_case(case, truth, known), on_case)


def extract_each(cases: Iterable[tuple[Path, dict]], extract_one: Callable[[Path, dict], R],
                 on_case: Callable[[str], None] | None = None) -> list[R]:
    """`extract_one` of every (case folder, truth), `on_case` told each case's name after it."""
    out = []
    for case, truth in cases:
        out.append(extract_one(case, truth))
        if on_case:
            on_case(case.name)
    return out


def save_records(records: Sequence[Record], path: Path) -> None:
    path.write_text(json.dumps({"version": MODEL_VERSION, "records": [r.to_dict() for r in records]},
                               indent=0) + "\n")


def load_records(path: Path) -> list[Record]:
    data = json.loads(path.read_text())
    return [Record(case=r["case"], source=r["source"], stage=r["stage"], rule=r["rule"],
                   evidence=evidence_from_dict(r["evidence"]) if r.get("evidence") else None,
                   wave=int(r.get("wave") or 1), split=str(r.get("split") or ""))
            for r in data["records"]]


# --- fitting -----------------------------------------------------------------------------------

SCALINGS = ("binary", "tfidf")  # how a feature present counts (`fit`)


def idf_of(counts: Counter[str], n: int, vocab: Iterable[str]) -> dict[str, float]:
    """Each feature's inverse document frequency over `n` cases, `counts` of which show it: ln((1 + n) /
    (1 + count)) + 1, scikit-learn's smoothed idf, rounded as the model file keeps it."""
    import math

    return {f: round(math.log((1 + n) / (1 + counts[f])) + 1.0, 4) for f in vocab}


def fit(records: Sequence[Record], c: float, min_df: int, threshold: float = 0.0, combine: str = "model",
        timeline: str = "progress", class_weight: str | None = None, fallback: str = "none",
        fallback_below: float = 0.0, overrule: str = "none", scaling: str = "binary",
        under_way: str = "rules", under_way_margin: float = 0.0) -> StageModel:
    """A multinomial logistic regression over the features seen in at least `min_df` cases, each
    counting 1 (`scaling` "binary") or its idf over the L2 norm of the case's (`tfidf`:
    `engine.stage_model.scaled_features`, as the shipped model predicts); `class_weight` "balanced": each
    stage weighs as much as every other in the fit, however few its cases (the commonest label, training,
    then no longer wins where the words are new)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    if scaling not in SCALINGS:
        raise ValueError(f"unknown feature scaling {scaling!r} (one of {', '.join(SCALINGS)})")
    counts = Counter(f for r in records for f in r.features)
    vocab = sorted(f for f, n in counts.items() if n >= min_df)
    col = {f: j for j, f in enumerate(vocab)}
    idf = idf_of(counts, len(records), vocab) if scaling == "tfidf" else None
    x = np.zeros((len(records), len(vocab)))
    for i, r in enumerate(records):
        for f, v in scaled_features({f for f in r.features if f in col}, idf).items():
            x[i, col[f]] = v
    y = [r.stage for r in records]
    classes = sorted(set(y))
    if len(classes) == 1:  # nothing to weigh: one stage, certain
        return StageModel(MODEL_VERSION, tuple(classes), (0.0,), {}, threshold, combine, timeline, fallback,
                          fallback_below, overrule, idf, under_way, under_way_margin)
    lr = LogisticRegression(C=c, max_iter=5000, class_weight=class_weight)
    lr.fit(x, y)
    coef, icpt = lr.coef_, lr.intercept_
    if len(lr.classes_) == 2:  # sklearn keeps one row for two classes: the second's log-odds
        coef = np.vstack([-coef[0] / 2, coef[0] / 2])
        icpt = np.array([-icpt[0] / 2, icpt[0] / 2])
    weights = {f: tuple(round(float(w), 4) for w in coef[:, j]) for f, j in col.items()
               if np.abs(coef[:, j]).max() >= 1e-4}
    return StageModel(MODEL_VERSION, tuple(str(c) for c in lr.classes_),
                      tuple(round(float(b), 4) for b in icpt), weights, threshold, combine, timeline,
                      fallback, fallback_below, overrule, idf, under_way, under_way_margin)


@dataclass
class Fold:
    """Out-of-fold predictions of one model configuration: per scored record, (stage, probability), and
    the probability of each stage from the failure's own words (`own_words`; empty where only the
    predictions were kept)."""
    c: float
    predictions: list[tuple[str, float]]
    own: list[dict[str, float]] = field(default_factory=list)


GROUPS = ("source", "wave")  # how cross-validation holds cases out (`folds`)


def loso_folds(records: Sequence[Record]) -> list[tuple[list[int], list[int]]]:
    """(train indices, held-out indices) per source: every source is held out once, whole."""
    by_source: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        by_source[r.source].append(i)
    return [([i for i in range(len(records)) if records[i].source != s], held)
            for s, held in sorted(by_source.items())]


def wave_folds(records: Sequence[Record]) -> list[tuple[list[int], list[int]]]:
    """(train indices, held-out indices) per public wave: the wave's cases (its development half; the
    test halves are never records) are held out whole and the model is fitted on every other case, the
    real runs included. A new wave brings new repositories and new wording, which leave-one-source-out
    hides (its other folds share the wave's vocabulary): this is the estimator of a held-out figure."""
    by_wave: dict[int, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        if r.corpus == "public":
            by_wave[r.wave].append(i)
    return [([i for i in range(len(records)) if i not in set(held)], held)
            for _, held in sorted(by_wave.items())]


def folds(records: Sequence[Record], group: str) -> list[tuple[list[int], list[int]]]:
    if group == "source":
        return loso_folds(records)
    if group == "wave":
        out = wave_folds(records)
        if len(out) < 2:
            raise ValueError("leave-one-wave-out needs public cases of two waves or more "
                             f"({len(out)} here); use leave-one-source-out")
        return out
    raise ValueError(f"unknown cross-validation group {group!r} (one of {', '.join(GROUPS)})")


def scored_indices(records: Sequence[Record], group: str) -> list[int]:
    """The records a grouping scores (each held out once), in order."""
    return sorted(i for _, held in folds(records, group) for i in held)


def cross_predict(records: Sequence[Record], c: float, min_df: int, group: str = "source",
                  class_weight: str | None = None, scaling: str = "binary", own: bool = False) -> Fold:
    """Out-of-fold predictions for the records `scored_indices` lists, in that order; with `own`, also
    the probabilities from each failure's own words (what `under_way` "model" reads)."""
    preds: dict[int, tuple[str, float]] = {}
    owns: dict[int, dict[str, float]] = {}
    for train, held in folds(records, group):
        model = fit([records[i] for i in train], c, min_df, class_weight=class_weight, scaling=scaling)
        for i in held:
            preds[i] = model.predict(records[i].features)
            ev = records[i].evidence
            if own:
                owns[i] = model.probabilities(features(own_words(ev)) if ev is not None else set())
    order = sorted(preds)
    return Fold(c=c, predictions=[preds[i] for i in order], own=[owns[i] for i in order if i in owns])


@dataclass
class Scored:
    name: str
    answers: list[str]
    right: int
    wrong: int
    abstained: int

    @property
    def accuracy(self) -> float:
        return self.right / max(1, len(self.answers))


def score(name: str, records: Sequence[Record], answers: list[str]) -> Scored:
    right = sum(a == r.stage for a, r in zip(answers, records, strict=True))
    abstained = sum(a == UNKNOWN for a in answers)
    return Scored(name, answers, right, len(answers) - right - abstained, abstained)


def answers_of(records: Sequence[Record], fold: Fold, combine: str, timeline: str,
               threshold: float, fallback: str = "none", fallback_below: float = 0.0,
               overrule: str = "none", under_way: str = "rules", under_way_margin: float = 0.0) -> list[str]:
    """The stage `engine.stage_model.decide` gives each record with these settings and the fold's
    out-of-fold predictions (`under_way` "model" needs the fold's `own` probabilities)."""
    if under_way not in UNDER_WAY:
        raise ValueError(f"unknown under_way {under_way!r} (one of {', '.join(UNDER_WAY)})")
    out = []
    for k, (r, (p, prob)) in enumerate(zip(records, fold.predictions, strict=True)):
        shown = timeline_stage(timeline, r.timeline)
        if combine == "timeline" and shown == "training" and under_way == "model":
            out.append(under_way_stage(fold.own[k], r.rule, under_way_margin))
            continue
        out.append(combined(combine, r.rule, shown, p, prob, threshold,
                            fallback_stage(fallback, r.rule, r.evidence), fallback_below,
                            overrule_stage(overrule, r.evidence)))
    return out


# C, timeline kind, threshold, fallback, below, overrule, under way
Setting = tuple[float, str, float, str, float, str, str]


# the combinations cross-validation chooses from (the settings' `combinations` may name fewer)
CANDIDATES = ("model", "timeline")


@dataclass
class CvResult:
    folds: dict[float, Fold]
    best: dict[str, Setting]  # combination -> (C, timeline kind, threshold, fallback, below) chosen
    scored: dict[str, Scored]  # row name -> scores with the chosen settings
    wrong_cost: float = 1.0
    group: str = "source"  # how the folds held cases out
    records: list[Record] = field(default_factory=list)  # the records scored (held out once each), in order


def utility(s: Scored, wrong_cost: float) -> float:
    """What a configuration is chosen by: right answers less `wrong_cost` per wrong one (0: the score of
    `l4 bench eval`, where `unknown` counts as wrong)."""
    return s.right - wrong_cost * s.wrong


def cross_validate(all_records: Sequence[Record], conf: dict | None = None, group: str = "source"
                   ) -> CvResult:
    """Cross-validation by `group` (leave-one-source-out, or leave-one-public-wave-out): every C,
    combination, timeline kind, threshold, fallback (what answers below which probability of the
    model), overrule (what answers however sure the model is) and `under_way` (what answers where the
    timeline shows training under way: the rules, or the model among the stages from training on) of the
    settings; the best of each combination by `utility`.
    The rules are scored beside them but are no candidate: they were written looking at these very
    cases, so their figure here is in-sample, not a transfer estimate."""
    from threadpoolctl import threadpool_limits

    conf = conf or settings()
    cost = float(conf["wrong_cost"])
    records = [all_records[i] for i in scored_indices(all_records, group)]
    with threadpool_limits(1):  # small fits: BLAS threads only contend (seconds become minutes on a busy box)
        own = "model" in conf.get("under_way", []) and "timeline" in conf.get("combinations", CANDIDATES)
        by_c = {c: cross_predict(all_records, c, conf["min_df"], group, conf.get("class_weight"),
                                 conf.get("scaling", "binary"), own)
                for c in conf["C"]}
    best: dict[str, Setting] = {}
    scored: dict[str, Scored] = {"rules (in-sample)": score("rules (in-sample)", records,
                                                             [r.rule for r in records])}
    for combine in conf.get("combinations", CANDIDATES):
        kinds = conf["timeline_kinds"] if combine == "timeline" else ["progress"]
        backs = [(f, b) for f in conf.get("fallbacks", ["none"]) for b in conf.get("fallback_below", [0.0])
                 if (f == "none") == (b == 0.0)] or [("none", 0.0)]
        overrules = list(conf.get("overrules", ["none"]))
        ways = list(conf.get("under_way", ["rules"])) if combine == "timeline" else ["rules"]
        margin = float(conf.get("under_way_margin", 0.0))
        options = []
        for c, fold in by_c.items():
            for kind in kinds:
                for t in conf["thresholds"]:
                    for fb, below in backs:
                        for ov, way in ((o, w) for o in overrules for w in ways):
                            s = score(combine, records,
                                      answers_of(records, fold, combine, kind, t, fb, below, ov, way,
                                                 margin))
                            # ties: the lower threshold (an abstention that does not pay is none), then no
                            # overrule, then no fallback and the lower one, then the wider timeline (where
                            # the job's own timeline shows a stage, evidence beats words), then the rules
                            # where training is under way
                            rank = (utility(s, cost), -t, -(ov != "none"), -below, kinds.index(kind),
                                    way == "rules")
                            options.append((rank, (c, kind, t, fb, below, ov, way), s))
        _, chosen, s = max(options, key=lambda o: o[0])
        best[combine] = chosen
        scored[combine] = s
        c0, kind0, _, fb0, below0, ov0, way0 = chosen
        name = f"{combine}, never unknown"
        scored[name] = score(name, records,
                             answers_of(records, by_c[c0], combine, kind0, 0.0, fb0, below0, ov0, way0,
                                        margin))
    return CvResult(folds=by_c, best=best, scored=scored, wrong_cost=cost, group=group, records=records)


def best_combination(res: CvResult) -> tuple[str, Setting]:
    """The combination to ship: the candidate of the best `utility` in cross-validation."""
    name = max(res.best, key=lambda n: utility(res.scored[n], res.wrong_cost))
    return name, res.best[name]


def split_answers(records: Sequence[Record], res: CvResult) -> tuple[list[int], list[int]]:
    """(cases the rules answer, cases the model answers) in the chosen `timeline` combination."""
    kind = res.best["timeline"][1]
    ruled = [i for i, r in enumerate(records) if timeline_stage(kind, r.timeline) is not None]
    return ruled, [i for i in range(len(records)) if i not in set(ruled)]


GROUP_TITLES = {"source": "leave-one-source-out", "wave": "leave-one-public-wave-out"}


def format_cv(res: CvResult) -> str:
    """Per stage, per corpus and per public wave accuracy of each row, then the settings chosen."""
    records = res.records
    rows = list(res.scored.values())
    head = "| stage | cases | " + " | ".join(s.name for s in rows) + " |"
    title = f"#### Stage by {GROUP_TITLES[res.group]} cross-validation"
    out = [title, "", head, "|" + "---|" * (len(rows) + 2)]
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        groups[r.stage].append(i)
        groups[f"*{r.corpus} cases*"].append(i)
        if r.corpus == "public":
            groups[f"*public wave {r.wave}*"].append(i)
    waves = sorted(g for g in groups if g.startswith("*public wave"))
    names = [g for g in (*STAGES, "*public cases*", *waves, "*realrun cases*") if g in groups]
    for g in names:
        idx = groups[g]
        cells = [f"{sum(s.answers[i] == records[i].stage for i in idx) / len(idx):.2f}" for s in rows]
        out.append(f"| {g} | {len(idx)} | " + " | ".join(cells) + " |")
    out.append(f"| **all** | {len(records)} | " + " | ".join(f"**{s.accuracy:.2f}**" for s in rows) + " |")
    out.append("| abstained | | " + " | ".join(f"{s.abstained / len(records):.2f}" for s in rows) + " |")
    out.append("| wrong | | " + " | ".join(f"{s.wrong / len(records):.2f}" for s in rows) + " |")
    out.append("")
    sources = len({r.source for r in records})
    n_folds = len({r.source for r in records}) if res.group == "source" else len(waves)
    out.append(f"{len(records)} cases scored, {sources} sources, {n_folds} folds.")
    for name, (c, kind, t, fb, below, ov, way) in res.best.items():
        extra = f", timeline {kind}" if name == "timeline" else ""
        back = f", fallback {fb} below p {below}" if fb != "none" else ""
        over = f", overrule {ov}" if ov != "none" else ""
        under = ", the model where training is under way" if way == "model" else ""
        out.append(f"- {name}: C {c}{extra}, unknown below p {t}{back}{over}{under}")
    chosen, _ = best_combination(res)
    out.append(f"- chosen: {chosen} (by right answers less {res.wrong_cost:g} per wrong one)")
    if "timeline" in res.best:
        ruled, learned = split_answers(records, res)
        answers = res.scored["timeline"].answers
        for what, idx in (("the rules (a timeline shows; in-sample)", ruled),
                          ("the model (out of fold)", learned)):
            right = sum(answers[i] == records[i].stage for i in idx) / max(1, len(idx))
            out.append(f"- timeline: {len(idx)} cases answered by {what}: {right:.2f} right")
    return "\n".join(out)


def model_json(doc: dict) -> str:
    """The model file's text: the header indented, one line per feature (its weight per class)."""
    weights = doc["weights"]
    head = json.dumps({k: v for k, v in doc.items() if k != "weights"}, indent=1)
    rows = ",\n".join(f"  {json.dumps(f)}: {json.dumps(w)}" for f, w in weights.items())
    return head[:-2] + ',\n "weights": {\n' + rows + "\n }\n}\n"


def train(records: Sequence[Record], out: Path, conf: dict | None = None) -> tuple[StageModel, CvResult]:
    """Cross-validate by the settings' `select_by` grouping, fit the chosen configuration on every
    record, write it to `out`."""
    conf = conf or settings()
    group = conf.get("select_by", "wave")
    if group == "wave" and len(wave_folds(records)) < 2:  # a corpus of one wave: no wave to hold out
        group = "source"
    res = cross_validate(records, conf, group)
    name, (c, kind, t, fb, below, ov, way) = best_combination(res)
    model = fit(records, c, conf["min_df"], threshold=t, combine=name, timeline=kind,
                class_weight=conf.get("class_weight"), fallback=fb, fallback_below=below, overrule=ov,
                scaling=conf.get("scaling", "binary"), under_way=way,
                under_way_margin=float(conf.get("under_way_margin", 0.0)))
    body = model.to_dict()
    doc = {"about": "engine/stage_model.py: stage = softmax(intercept + sum of the weights of the features "
                    "present, each times its idf over the norm of theirs when `idf` is given); trained by "
                    "`l4 bench stage-model train` (engine/bench/stage_learn.py)",
           "trained_on": {"cases": len(records), "sources": len({r.source for r in records}),
                          "cv": GROUP_TITLES[res.group],
                          "cv_accuracy": {k: round(s.accuracy, 4) for k, s in res.scored.items()},
                          "C": c, "class_weight": conf.get("class_weight"),
                          "scaling": conf.get("scaling", "binary")},
           **body}
    out.write_text(model_json(doc))
    return model, res

