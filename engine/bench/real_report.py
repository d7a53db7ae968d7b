"""Markdown tables of a corpus of real cases (`l4 bench eval` when cases label `root_lines`).

L4 beside grep over raw lines (file order, time order) and Error_time, all on the same cases:
root cause first, among the first 3 events, stage (abstained = `unknown`, never right), events
P/R/F1, faulty node top-1/top-3 (hardware cases naming faulty nodes); then L4 per fault kind and per
source, with the baselines' root-first figures.
"""
from __future__ import annotations

from engine.bench.evaluate import ROOT_BASELINES, ROOT_TOP, EvalResult, Tally


def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def _stage(t: Tally) -> tuple[str, str]:
    if not t.stage_cases:
        return "–", "–"
    return _f(t.stage_ok / t.stage_cases), _f(t.stage_abstained / t.stage_cases)


def _methods(res: EvalResult) -> list[str]:
    return [m for m in ("L4", *ROOT_BASELINES) if m in res.overall]


def _overall_rows(res: EvalResult, label: str = "") -> list[str]:
    rows = []
    for name in _methods(res):
        t = res.overall[name]
        stage, abstained = _stage(t)
        lead = f"| {label} " if label else ""
        rows.append(
            f"{lead}| {name} | {t.cases} | {_f(t.rate(t.root_first, t.root_cases))} | "
            f"{_f(t.rate(t.root_top, t.root_cases))} | {stage} | {abstained} | {t.precision:.2f} | "
            f"{t.recall:.2f} | {t.f1:.2f} | {_f(t.top_rate(1))} | {_f(t.top_rate(3))} | "
            f"{t.seconds / max(1, t.cases):.3f} |"
        )
    return rows


_OVERALL_HEAD = (f"| method | cases | root first | root top-{ROOT_TOP} | stage acc | abstained | events P "
                 "| events R | events F1 | node top-1 | node top-3 | s/case |")
_OVERALL_COLS = 12


def _grouped(title: str, groups: dict[str, dict[str, Tally]], res: EvalResult) -> list[str]:
    base = [m for m in _methods(res) if m != "L4"]
    out = [
        f"#### L4 per {title} ({res.split})",
        "",
        f"| {title} | cases | root first | root top-{ROOT_TOP} | stage acc | abstained | events F1 | "
        + " | ".join(f"{m} root first" for m in base) + " |",
        "|" + "---|" * (7 + len(base)),
    ]
    for key, methods in sorted(groups.items()):
        t = methods["L4"]
        stage, abstained = _stage(t)
        others = [methods.get(m) for m in base]
        out.append(
            f"| {key} | {t.cases} | {_f(t.rate(t.root_first, t.root_cases))} | "
            f"{_f(t.rate(t.root_top, t.root_cases))} | {stage} | {abstained} | {t.f1:.2f} | "
            + " | ".join(_f(o.rate(o.root_first, o.root_cases)) if o else "–" for o in others) + " |"
        )
    return out


def format_real_report(res: EvalResult) -> str:
    out = [f"#### L4 and the baselines ({res.split})", "", _OVERALL_HEAD, "|" + "---|" * _OVERALL_COLS]
    out += _overall_rows(res)
    out += [""] + _grouped("fault kind", res.per_kind, res)
    out += [""] + _grouped("source", res.per_source, res)
    out += [""] + _by_basis(res)
    return "\n".join(out)


# the learned model's answers, by its probability: (label, lower bound), highest first
WORD_BANDS = (("words, p ≥ 0.6", 0.6), ("words, p 0.4–0.6", 0.4), ("words, p < 0.4", 0.0))


def basis_row(case: dict) -> str:
    """The row of `format_real_report`'s stage-by-basis table a case's answer falls in."""
    source = case.get("stage_basis")
    if source is None:
        return "none (no event)"
    if source != "words":
        return source
    p = case.get("stage_probability") or 0.0
    return next(label for label, low in WORD_BANDS if p >= low)


def _by_basis(res: EvalResult) -> list[str]:
    """How often L4's stage is right by what it rests on (`engine.model.StageBasis`): the trust a reader
    may put in a diagnosis's `stage_basis`."""
    rows: dict[str, list[int]] = {}
    for case in res.cases:
        row = rows.setdefault(basis_row(case), [0, 0])
        row[0] += 1
        row[1] += int(case["stage"] == case["truth_stage"])
    order = ["timeline", "frame", "lexicon", *(label for label, _ in WORD_BANDS), "rules", "none (no event)"]
    out = [f"Stage by what it rests on ({res.split}):", "", "| basis | cases | share | stage right |",
           "|---|---|---|---|"]
    total = max(1, len(res.cases))
    for key in sorted(rows, key=lambda k: order.index(k) if k in order else len(order)):
        n, right = rows[key]
        out.append(f"| {key} | {n} | {n / total:.2f} | {right / n:.2f} ({right}) |")
    return out


def format_real_splits(results: dict[str, EvalResult]) -> str:
    """The overall table of several splits side by side (first given first), then each in detail."""
    head = "| split " + _OVERALL_HEAD
    out = ["#### L4 and the baselines by split", "", head, "|" + "---|" * (_OVERALL_COLS + 1)]
    for split, res in results.items():
        out += _overall_rows(res, split)
    for res in results.values():
        out += ["", format_real_report(res)]
    return "\n".join(out)
