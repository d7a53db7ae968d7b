"""Learning the root-cause order from labelled cases (`l4 bench root-model extract|cv`).

`extract` runs the engine on every usable case (truth.json with `root_lines`, or a generated case's
`indicating` lines of its own fault kind; the held-out halves of data/root_learn.yaml skipped) and
keeps, per case, the first `engine.root_model.HEAD` events of the hand order: their features
(`engine.root_model.features`), hand score, role, severity and label (the event shows a root line
as `l4 bench eval` scores it, `engine.bench.rootcause.shows_root`). `cv` scores the hand order, the
learned order (a linear model over the features without the hand score) and a blend (the hand score
among the features) by leave-one-group-out cross-validation (`--group wave`: each public wave, each
real-run wave, the outsider generator and the synthetic generator is a group; `--group source`: each
source), the root cause first and among the first 3 events as `l4 bench eval` counts them (the
events `select_events` keeps of the re-ordered list, the hand scores' values kept by rank so that
as many events are kept as before), and says whether the best learned or blend order would ship
(`ship_rule`). None did on the development corpora (README), so the engine keeps the hand order:
there is no model file and no hook in `engine.events`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.bench.evaluate import ROOT_TOP, parse_case, source_group
from engine.bench.held_out import CORPORA, corpus_of, held_out  # noqa: F401 - CORPORA, corpus_of: this module's API
from engine.root_model import HAND_FEATURES, HEAD, RootModel

RECORDS_VERSION = 1
MODEL_VERSION = 1  # of `RootModel`s fitted here
DATA = Path(__file__).parent / "data" / "root_learn.yaml"


def settings() -> dict:
    import yaml

    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or "version" not in data:
        raise ValueError(f"{DATA} has no version")
    return data


def root_lines(truth: dict) -> list[str]:
    """The root lines of a case: truth `root_lines`; for a generated case (no source), the indicating
    lines of its own fault kind (else its first indicating group)."""
    if truth.get("root_lines"):
        return list(truth["root_lines"])
    groups = truth.get("indicating") or []
    own = [g for g in groups if g.get("key") == truth.get("kind")] or groups[:1]
    return [ln for g in own for ln in g.get("lines", [])]


def usable_cases(roots: Iterable[Path], rules: Sequence[dict]) -> list[tuple[Path, dict]]:
    """(case folder, truth) of the labelled cases under `roots`, each once, held-out halves left out."""
    from engine.bench.stage_learn import each_case

    return [(case, truth) for case, truth in each_case(roots)
            if not held_out(truth, rules) and root_lines(truth)]


@dataclass
class Candidate:
    features: dict[str, float]
    label: bool  # it shows a root line
    score: float  # the hand score
    severity: float
    role: str | None
    last_words: bool = False  # shown after the selected events where none raises an alarm (engine.lastwords)


@dataclass
class Record:
    case: str
    corpus: str
    source: str
    wave: int
    split: str
    candidates: list[Candidate] = field(default_factory=list)  # the hand order's first HEAD events

    @property
    def group(self) -> str:
        """The leave-one-wave-out group: a public or real-run wave, the outsider's or our generator."""
        return f"{self.corpus} wave {self.wave}" if self.corpus in ("public", "realrun") else self.corpus

    def to_dict(self) -> dict:
        return {"case": self.case, "corpus": self.corpus, "source": self.source, "wave": self.wave,
                "split": self.split,
                "candidates": [{"f": c.features, "label": int(c.label), "score": c.score,
                                "severity": c.severity, "role": c.role, "last_words": int(c.last_words)}
                               for c in self.candidates]}


def record_from_dict(d: dict) -> Record:
    return Record(case=d["case"], corpus=d["corpus"], source=d["source"], wave=int(d["wave"]),
                  split=str(d.get("split") or ""),
                  candidates=[Candidate(features={k: float(v) for k, v in c["f"].items()},
                                        label=bool(c["label"]), score=float(c["score"]),
                                        severity=float(c["severity"]), role=c.get("role"),
                                        last_words=bool(c.get("last_words", 0)))
                              for c in d["candidates"]])


def extract_case(case: Path, truth: dict) -> Record:
    """Run the engine on one case (hand order) and keep the first HEAD scored events."""
    from engine.bench.rootcause import shows_root
    from engine.root_model import features

    parsed = parse_case(case)
    job = parsed[0]
    scored = hand_order(job, parsed[1:])
    roots = root_lines(truth)
    cands = []
    for e, f in zip(scored[:HEAD], features(job, scored), strict=True):
        t = job.templates[e.id]
        examples = list(dict.fromkeys([*e.evidence, *t.examples]))[:3]  # as `analyze` shows them
        cands.append(Candidate(features=f, label=shows_root(t.template, examples, roots), score=e.score,
                               severity=e.severity, role=e.role, last_words=e.last_words))
    corpus = corpus_of(truth)
    return Record(case=case.name, corpus=corpus,
                  source=source_group(truth) if corpus != "synthetic" else "synthetic",
                  wave=int(truth.get("wave") or 1), split=str(truth.get("split") or ""), candidates=cands)


def hand_order(job, history: Sequence) -> list:
    """The scored events of `job` (parsed with its `history`), hand order, as `engine.diagnose.analyze`
    scores them: years and zones settled, candidates those no history job shows."""
    from engine.diagnose import score_job

    return score_job(job, history)[3]


def extract(roots: Iterable[Path], on_case: Callable[[str], None] | None = None) -> list[Record]:
    from engine.bench.stage_learn import extract_each

    return extract_each(usable_cases(roots, settings()["held_out"]), extract_case, on_case)


def save_records(records: Sequence[Record], path: Path) -> None:
    path.write_text(json.dumps({"version": RECORDS_VERSION, "records": [r.to_dict() for r in records]})
                    + "\n")


def load_records(path: Path) -> list[Record]:
    data = json.loads(path.read_text())
    return [record_from_dict(r) for r in data["records"]]


# --- ordering and scoring ----------------------------------------------------------------------

def shown_rank(record: Record, order: Sequence[int]) -> int | None:
    """The 1-based place of the first event showing a root line among the events `select_events`
    keeps when the first len(order) candidates are put in `order` (hand scores kept by rank)."""
    from engine.events import ScoredEvent, select_events

    cands = record.candidates
    k = len(order)
    values = [c.score for c in cands[:k]]
    seq = [*order, *range(k, len(cands))]
    events = [ScoredEvent(id=j, score=values[n] if n < k else cands[j].score, severity=cands[j].severity,
                          cascade=cands[j].role in ("cascade", "consequence"), role=cands[j].role,
                          last_words=cands[j].last_words)
              for n, j in enumerate(seq)]
    for place, e in enumerate(select_events(events), start=1):
        if cands[e.id].label:
            return place
    return None


def model_order(record: Record, model: RootModel) -> list[int]:
    k = min(model.top_k, len(record.candidates))
    return sorted(range(k), key=lambda r: (-model.score(record.candidates[r].features), r))


# --- fitting -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Config:
    kind: str  # pointwise | pairwise
    c: float
    top_k: int
    blend: bool  # the hand score among the features

    @property
    def name(self) -> str:
        return f"{'blend' if self.blend else 'learned'} {self.kind} C={self.c:g} k={self.top_k}"


def _row(f: dict[str, float], blend: bool) -> dict[str, float]:
    return f if blend else {k: v for k, v in f.items() if k not in HAND_FEATURES}


def fit(records: Sequence[Record], config: Config) -> RootModel:
    """A logistic regression over the features of the first `top_k` candidates of every case whose root
    is among them: pointwise (root or not) or pairwise (which of a root and another is the root)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    rows = [[_row(c.features, config.blend) for c in r.candidates[:config.top_k]] for r in records]
    labels = [[c.label for c in r.candidates[:config.top_k]] for r in records]
    vocab = sorted({k for case in rows for f in case for k in f})
    col = {k: j for j, k in enumerate(vocab)}

    def vec(f: dict[str, float]) -> np.ndarray:
        v = np.zeros(len(vocab))
        for k, x in f.items():
            if k in col:
                v[col[k]] = x
        return v

    xs, ys = [], []
    for case, lab in zip(rows, labels, strict=True):
        if not any(lab) or all(lab):
            continue  # nothing to learn about the order here
        vs = [vec(f) for f in case]
        if config.kind == "pairwise":
            for a, la in zip(vs, lab, strict=True):
                for b, lb in zip(vs, lab, strict=True):
                    if la and not lb:
                        xs += [a - b, b - a]
                        ys += [1, 0]
        else:
            xs += vs
            ys += [int(x) for x in lab]
    if not xs or len(set(ys)) < 2:
        return RootModel(MODEL_VERSION, config.top_k, {"hand": 1.0})
    lr = LogisticRegression(C=config.c, max_iter=5000, fit_intercept=config.kind != "pairwise",
                            class_weight="balanced" if config.kind == "pointwise" else None)
    lr.fit(np.array(xs), np.array(ys))
    weights = {k: round(float(w), 5) for k, w in zip(vocab, lr.coef_[0], strict=True) if abs(w) >= 1e-5}
    return RootModel(MODEL_VERSION, config.top_k, weights)


def configs(conf: dict) -> list[Config]:
    return [Config(kind, float(c), int(k), blend) for blend in (False, True) for kind in conf["kinds"]
            for c in conf["C"] for k in conf["top_k"]]


GROUPS = ("wave", "source", "corpus")


def group_of(record: Record, group: str) -> str:
    """The cross-validation group of a record (or of anything with `group`, `source`, `corpus`: a
    `severity_learn.Case`): its wave, its source or its corpus."""
    if group not in GROUPS:
        raise ValueError(f"unknown cross-validation group {group!r} (one of {', '.join(GROUPS)})")
    return record.group if group == "wave" else getattr(record, group)


def group_index(items: Sequence, group: str) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """The indices of `items` per cross-validation group (`group_of`) and per corpus ("*<corpus>,
    pooled*"), for the tables."""
    groups: dict[str, list[int]] = defaultdict(list)
    pooled: dict[str, list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        groups[group_of(item, group)].append(i)
        pooled[f"*{item.corpus}, pooled*"].append(i)
    return groups, pooled


@dataclass
class Ranks:
    """Per record, the 1-based place of the root among the kept events (None: not shown)."""
    name: str
    ranks: list[int | None]


def cross_ranks(records: Sequence[Record], config: Config, group: str) -> Ranks:
    by: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        by[group_of(r, group)].append(i)
    if len(by) < 2:
        raise ValueError(f"leave-one-{group}-out needs two groups or more ({len(by)} here)")
    out: list[int | None] = [None] * len(records)
    for g, held in by.items():
        model = fit([r for r in records if group_of(r, group) != g], config)
        for i in held:
            out[i] = shown_rank(records[i], model_order(records[i], model))
    return Ranks(config.name, out)


def hand_ranks(records: Sequence[Record]) -> Ranks:
    return Ranks("hand", [shown_rank(r, []) for r in records])


def firsts(ranks: Ranks, idx: Sequence[int]) -> tuple[int, int]:
    """(root first, root among the first ROOT_TOP) counts over the records `idx`."""
    rs = [ranks.ranks[i] for i in idx]
    return sum(r == 1 for r in rs), sum(r is not None and r <= ROOT_TOP for r in rs)


def public_idx(records: Sequence[Record]) -> list[int]:
    return [i for i, r in enumerate(records) if r.corpus == "public"]


def utility(records: Sequence[Record], ranks: Ranks) -> tuple[int, int]:
    """What settings are chosen by: the root first on the left-out public waves, then among the first 3."""
    return firsts(ranks, public_idx(records))


@dataclass
class CvResult:
    group: str
    records: list[Record]
    hand: Ranks
    tried: dict[Config, Ranks]
    best: dict[str, Config]  # learned / blend -> chosen settings


def cross_validate(records: Sequence[Record], conf: dict | None = None, group: str = "wave") -> CvResult:
    """Every setting of the settings' grid by leave-one-`group`-out; the best learned and blend ones by
    `utility` (ties: the simpler, earlier in the grid)."""
    from threadpoolctl import threadpool_limits

    conf = conf or settings()
    records = list(records)
    with threadpool_limits(1):
        tried = {cfg: cross_ranks(records, cfg, group) for cfg in configs(conf)}
    best = {}
    for blend, name in ((False, "learned"), (True, "blend")):
        options = [cfg for cfg in tried if cfg.blend == blend]
        best[name] = max(options, key=lambda cfg: (utility(records, tried[cfg]), -options.index(cfg)))
    return CvResult(group, records, hand_ranks(records), tried, best)


def ship_rule(res: CvResult, name: str) -> tuple[bool, str]:
    """Whether the chosen `name` order may ship: more roots first than the hand order on the pooled
    left-out public waves, and no other group (real-run wave, othergen, synthetic) one more than one
    case worse in root first."""
    cfg = res.best[name]
    ranks = res.tried[cfg]
    pub = public_idx(res.records)
    gain = firsts(ranks, pub)[0] - firsts(res.hand, pub)[0]
    if gain <= 0:
        return False, f"{name}: public root first {gain:+d} cases against the hand order"
    by: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(res.records):
        if r.corpus != "public":
            by[r.group].append(i)
    for g, idx in sorted(by.items()):
        loss = firsts(res.hand, idx)[0] - firsts(ranks, idx)[0]
        if loss > 1:
            return False, f"{name}: public {gain:+d}, but {g} loses {loss} roots first"
    return True, f"{name}: public root first {gain:+d} cases, no other group more than 1 case worse"


def format_cv(res: CvResult) -> str:
    rows = [res.hand, res.tried[res.best["learned"]], res.tried[res.best["blend"]]]
    titles = ["hand", "learned", "blend"]
    out = [f"#### Root cause by leave-one-{res.group}-out cross-validation", "",
           "| left-out group | cases | " + " | ".join(f"{t} first | {t} top-3" for t in titles) + " |",
           "|" + "---|" * (2 + 2 * len(rows))]
    groups, pooled = group_index(res.records, res.group)
    for g, idx in [*sorted(groups.items()), *sorted(pooled.items()),
                   ("**all**", list(range(len(res.records))))]:
        cells = []
        for ranks in rows:
            first, top = firsts(ranks, idx)
            cells += [f"{first / len(idx):.2f} ({first})", f"{top / len(idx):.2f}"]
        out.append(f"| {g} | {len(idx)} | " + " | ".join(cells) + " |")
    out.append("")
    out.append(f"{len(res.records)} cases, {len(groups)} groups; settings tried: {len(res.tried)} "
               "(chosen by the pooled left-out public root first, then top-3).")
    for name in ("learned", "blend"):
        ok, why = ship_rule(res, name)
        out.append(f"- {name}: {res.best[name].name}; ships: {'yes' if ok else 'no'} ({why})")
    corpora = [c for c in CORPORA if c in {r.corpus for r in res.records}]
    out += ["", "Every setting tried, root first (cases) pooled per corpus, left out:", "",
            "| order | " + " | ".join(corpora) + " | all top-3 |", "|" + "---|" * (len(corpora) + 2)]
    every = range(len(res.records))
    for ranks in [res.hand, *res.tried.values()]:
        cells = [str(firsts(ranks, pooled[f"*{c}, pooled*"])[0]) for c in corpora]
        out.append(f"| {ranks.name} | " + " | ".join(cells) + f" | {firsts(ranks, every)[1]} |")
    return "\n".join(out)
