"""How well a careful reader finds the stage in a job's logs alone (`l4 bench stage-model agreement`).

The public cases' stages come from their threads: the reporter's and the maintainers' words, the code, a
later comment ("it fails right after the 3rd epoch's save"). The engine reads only the logs. A sample of
the cases was relabelled *blind*: annotators saw each case's log files under a neutral name (case01 …),
with the stage definitions and nothing else, no thread, no truth, no slug, and gave a stage per case and
whether they were sure. This module scores those answers against the labels, against each other
(Cohen's kappa), and the engine on the same cases: the annotators' agreement with the labels estimates what
the logs alone let a reader reach, a ceiling to hold the engine against. Annotators given the issue thread
as well (session 23) measure instead how reliably a reader of the thread reproduces the label. (The
annotators of tests/fixtures/stage_relabel/ are helper agents, not people; its README says how the samples
were drawn and who read what.)

Answers file (JSON lines): {"case": "<case folder name>", "annotator": "A", "stage": "training",
"sure": true, "why": "…"}; one line per annotator and case.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.model import LABELLED_STAGES

STAGES = LABELLED_STAGES  # the stages a case is labelled with


@dataclass(frozen=True)
class Answer:
    case: str
    annotator: str
    stage: str
    sure: bool
    why: str = ""


@dataclass
class Row:
    """One reader's answers scored against the labels (`right` of `cases`), on every subset."""
    name: str
    cases: int = 0
    right: int = 0
    by_subset: dict[str, list[int]] = field(default_factory=dict)  # subset -> [right, cases]

    def add(self, ok: bool, subsets: Sequence[str]) -> None:
        self.cases += 1
        self.right += ok
        for s in subsets:
            tally = self.by_subset.setdefault(s, [0, 0])
            tally[0] += ok
            tally[1] += 1


@dataclass
class Agreement:
    rows: list[Row]
    kappa: dict[str, float | None]  # pair name -> Cohen's kappa
    pair_agree: dict[str, tuple[int, int]]  # pair name -> (same answers, cases)
    cases: int
    labels: Counter


def load_answers(path: Path) -> list[Answer]:
    """The answers of a file: JSON lines as above, or a reading file of one reader ({"about": …,
    "readings": {case: {"stage", "reader", "sure", "why"}}}, engine/bench/data/blind_stage_reading.json, whose
    reader is named after the file). A malformed line or entry is a one-line ValueError naming it."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("{") and '"readings"' in text[:4000]:
        return _reading_file(path, text)
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            a = Answer(str(d["case"]), str(d["annotator"]), str(d["stage"]), bool(d["sure"]),
                       str(d.get("why", "")))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{n}: not an answer line ({exc})") from None
        if a.stage not in STAGES:
            raise ValueError(f"{path}:{n}: unknown stage {a.stage!r}")
        out.append(a)
    return out


def _reading_file(path: Path, text: str) -> list[Answer]:
    try:
        readings = json.loads(text)["readings"]
        out = [Answer(case, path.stem, str(r["reader"]), bool(r["sure"]), str(r.get("why", "")))
               for case, r in readings.items()]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: not a reading file ({exc})") from None
    bad = next((a for a in out if a.stage not in STAGES), None)
    if bad is not None:
        raise ValueError(f"{path}: {bad.case}: unknown stage {bad.stage!r}")
    return out


def cohen_kappa(a: Sequence[str], b: Sequence[str]) -> float | None:
    """Agreement of two readers beyond chance (1: always the same, 0: as often as chance would)."""
    n = len(a)
    if n == 0 or n != len(b):
        return None
    seen = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    chance = sum(ca[s] * cb[s] for s in set(ca) | set(cb)) / (n * n)
    return None if chance >= 1.0 else (seen - chance) / (1.0 - chance)


def agreement(corpus: Path, answers: Sequence[Answer], engine_stage: Callable[[Path], str] | None = None
              ) -> Agreement:
    """Score every annotator on the cases it answered, every pair of annotators on the cases both answered,
    and the engine (`engine_stage(case folder)`, when given) on every case some annotator answered.
    Subsets: the case's split (dev, test), `sure` (for an annotator: its own sure answers; for the engine:
    the cases every annotator of the case was sure of) and `readable` (every annotator of the case gave the
    label: the logs alone settle it)."""
    by: dict[str, dict[str, Answer]] = {}
    for a in answers:
        by.setdefault(a.annotator, {})[a.case] = a
    names = sorted(by)
    if not names:
        raise ValueError("no answers")
    cases = sorted(set().union(*(set(v) for v in by.values())))
    missing = [c for c in cases if not (corpus / c / "truth.json").is_file()]
    if missing:
        raise ValueError(f"no case {missing[0]} under {corpus}")
    truth = {c: json.loads((corpus / c / "truth.json").read_text(encoding="utf-8")) for c in cases}
    label = {c: truth[c]["stage"] for c in cases}
    rows = {n: Row(f"annotator {n}") for n in names}
    engine = Row("engine") if engine_stage is not None else None
    for c in cases:
        split = str(truth[c].get("split") or "")
        mine = [by[n][c] for n in names if c in by[n]]
        engine_right = engine_stage(corpus / c) == label[c] if engine_stage is not None else None
        where = [] if engine_right is None else ["engine right" if engine_right else "engine wrong"]
        for a in mine:
            rows[a.annotator].add(a.stage == label[c], [split] + (["sure"] if a.sure else []) + where)
        if engine is not None:
            subsets = ([split] + (["sure"] if all(a.sure for a in mine) else [])
                       + (["readable"] if all(a.stage == label[c] for a in mine) else []))
            engine.add(bool(engine_right), subsets)
    kappa, pair_agree = {}, {}
    for i, x in enumerate(names):
        mine = sorted(by[x])
        kappa[f"{x} – label"] = cohen_kappa([by[x][c].stage for c in mine], [label[c] for c in mine])
        for y in names[i + 1:]:
            both = sorted(set(by[x]) & set(by[y]))
            if not both:
                continue  # annotators of different samples
            xs, ys = [by[x][c].stage for c in both], [by[y][c].stage for c in both]
            kappa[f"{x} – {y}"] = cohen_kappa(xs, ys)
            pair_agree[f"{x} – {y}"] = (sum(p == q for p, q in zip(xs, ys, strict=True)), len(both))
    out = [rows[n] for n in names] + ([engine] if engine is not None else [])
    return Agreement(out, kappa, pair_agree, len(cases), Counter(label.values()))


def _rate(t: Sequence[int] | None) -> str:
    return "–" if not t or not t[1] else f"{t[0] / t[1]:.2f} ({t[0]}/{t[1]})"


def format_agreement(res: Agreement) -> str:
    lines = ["#### Stage relabelled blind, against the thread's label", "",
             "| reader | cases | agrees with the label | dev | test | sure answers | every reader gives it "
             "| where the engine is right | where it is wrong |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in res.rows:
        s = r.by_subset
        lines.append(f"| {r.name} | {r.cases} | {_rate((r.right, r.cases))} | {_rate(s.get('dev'))} | "
                     f"{_rate(s.get('test'))} | {_rate(s.get('sure'))} | {_rate(s.get('readable'))} | "
                     f"{_rate(s.get('engine right'))} | {_rate(s.get('engine wrong'))} |")
    lines += ["", "| pair | same stage | Cohen's kappa |", "|---|---|---|"]
    for pair, k in res.kappa.items():
        same = res.pair_agree.get(pair)
        lines.append(f"| {pair} | {_rate(same) if same else '–'} | {'–' if k is None else f'{k:.2f}'} |")
    lines += ["", f"{res.cases} cases; labels: " + ", ".join(f"{s} {n}" for s, n in res.labels.most_common()),
              "- sure answers: an annotator's own sure answers; for the engine, the cases every annotator "
              "was sure of",
              "- every reader gives it: the cases where every annotator gave the label (for readers of "
              "the logs alone: the logs settle it)",
              "- where the engine is right / wrong: an annotator's answers on the cases the engine answers "
              "right / wrong"]
    return "\n".join(lines)
