"""Scores L4 and the baselines on generated, labeled cases (`l4 bench eval`).

Event metrics are per case, summed over cases (micro-averaged): a reported event is right when one of
its example lines is a labeled failure-indicating line, neutral when it is a labeled cascade line
(watchdog timeouts on healthy ranks are consequences, neither right nor wrong), wrong otherwise.
Recall counts the labeled event kinds (truth `indicating[].key`) that some reported event shows.
Faulty-node top-k counts cases with a faulty node (hardware faults) whose node is among the first k.

History modes say where the "normal" events of cross-job filtering come from: ``parse`` (default)
parses the history jobs in the same Drain run as the failed job (`l4 diagnose --history`); ``pool``
diagnoses the failed job alone against a normal pool learned from *separate* parses of the history
jobs (what `l4 learn` stores; the caller may pass the function that builds it, e.g. through a real
knowledge base); ``none`` uses no history at all.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.bench.baselines import BASELINES
from engine.diagnose import analyze
from engine.parse import parse_jobs

TOPS = (1, 3, 5, 8)
HISTORY_MODES = ("parse", "pool", "none")

PoolOf = Callable[[Path, Sequence[Path]], set[str]]
"""(failed job folder, history job folders) → the normal pool's template texts."""


def separate_pool(failed: Path, history: Sequence[Path]) -> set[str]:
    """Templates of each history job parsed on its own, as `l4 learn` stores them (no database)."""
    return {t.template for h in history for t in parse_jobs([h])[0].templates}


@dataclass
class Tally:
    cases: int = 0
    tp: int = 0
    fp: int = 0
    keys_hit: int = 0
    keys: int = 0
    node_cases: int = 0
    top: dict[int, int] = field(default_factory=lambda: {k: 0 for k in TOPS})
    stage_ok: int = 0
    iter_cases: int = 0
    iter_ok: int = 0
    seconds: float = 0.0

    def add_events(self, examples: Sequence[Sequence[str]], truth: dict) -> None:
        line_key = {ln: g["key"] for g in truth["indicating"] for ln in g["lines"]}
        # consequences elsewhere and context on the faulty rank (traceback frames) are neutral
        cascade = set(truth.get("cascade_lines", [])) | set(truth.get("context_lines", []))
        hit = set()
        for ex in examples:
            keys = {line_key[x] for x in ex if x in line_key}
            if keys:
                self.tp += 1
                hit |= keys
            elif not any(x in cascade for x in ex):
                self.fp += 1
        self.keys += len({g["key"] for g in truth["indicating"]})
        self.keys_hit += len(hit)

    def add_nodes(self, ranked: Sequence[str], truth: dict) -> None:
        faulty = set(truth.get("faulty_nodes") or [])
        if not faulty or not truth["category"].startswith("hardware/"):
            return
        self.node_cases += 1
        for k in TOPS:
            if faulty & set(ranked[:k]):
                self.top[k] += 1

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.keys_hit / self.keys if self.keys else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def top_rate(self, k: int) -> float | None:
        return self.top[k] / self.node_cases if self.node_cases else None


def case_dirs(root: Path) -> list[Path]:
    index = root / "cases.json"
    if index.is_file():
        data = json.loads(index.read_text())
        names = [
            c if isinstance(c, str) else c.get("case_dir") or c.get("path") or c.get("id")
            for c in (data.get("cases") if isinstance(data, dict) else data)
        ]
        dirs = [root / Path(str(n)).name for n in names]
        return [d for d in dirs if (d / "truth.json").is_file()]
    return sorted(p.parent for p in root.glob("*/truth.json"))


@dataclass
class EvalResult:
    per_kind: dict[str, dict[str, Tally]]  # kind -> method -> tally
    overall: dict[str, Tally]


def evaluate(root: Path, on_case: Callable[[str, dict], None] | None = None, *,
             history_mode: str = "parse", pool_of: PoolOf = separate_pool) -> EvalResult:
    """Score every case of `root`. s/case counts parsing and analysing the failed job (with its
    history in ``parse`` mode), not building the pool in ``pool`` mode (learning happens offline)."""
    if history_mode not in HISTORY_MODES:
        raise ValueError(f"unknown history mode {history_mode!r} (one of {', '.join(HISTORY_MODES)})")
    per_kind: dict[str, dict[str, Tally]] = defaultdict(lambda: defaultdict(Tally))
    overall: dict[str, Tally] = defaultdict(Tally)
    for case in case_dirs(root):
        truth = json.loads((case / "truth.json").read_text())
        history = (
            sorted(p for p in (case / "history").iterdir() if p.is_dir())
            if (case / "history").is_dir()
            else []
        )
        normal = pool_of(case / "failed", history) if history_mode == "pool" else set()
        t0 = time.perf_counter()
        if history_mode == "parse":
            parsed = parse_jobs([case / "failed", *history])
            diagnosis = analyze(parsed[0], parsed[1:])
        else:
            parsed = parse_jobs([case / "failed"])
            diagnosis = analyze(parsed[0], normal=normal)
        secs = time.perf_counter() - t0
        results = {
            "L4": (
                [e.examples for e in diagnosis.events],
                [n.node for n in diagnosis.nodes],
                diagnosis.stage,
                diagnosis.iterations[0].iteration if diagnosis.iterations else None,
                secs,
            )
        }
        failed = parsed[0]
        for name, fn in BASELINES.items():
            t1 = time.perf_counter()
            ids, nodes = fn(failed)
            results[name] = (
                [failed.templates[i].examples for i in ids],
                nodes,
                None,
                None,
                time.perf_counter() - t1,
            )
        for name, (examples, nodes, stage, iteration, s) in results.items():
            for tally in (per_kind[truth["kind"]][name], overall[name]):
                tally.cases += 1
                tally.seconds += s
                tally.add_events(examples, truth)
                tally.add_nodes(nodes, truth)
                if stage is not None and stage == truth["stage"]:
                    tally.stage_ok += 1
                if truth.get("iteration") is not None and name == "L4":
                    tally.iter_cases += 1
                    tally.iter_ok += int(iteration == truth["iteration"])
        if on_case:
            on_case(
                case.name,
                {
                    "kind": truth["kind"],
                    "stage": diagnosis.stage,
                    "truth_stage": truth["stage"],
                    "nodes": [n.node for n in diagnosis.nodes[:3]],
                    "faulty": truth["faulty_nodes"],
                    "seconds": round(secs, 2),
                },
            )
    return EvalResult(per_kind={k: dict(v) for k, v in per_kind.items()}, overall=dict(overall))


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def format_report(res: EvalResult) -> str:
    out = [
        "### L4 per fault kind",
        "",
        "| kind | cases | events P | events R | events F1 | node top-1 | top-3 | top-5 | top-8 | stage acc "
        "| iteration acc | s/case |",
        "|" + "---|" * 12,
    ]
    rows = sorted(res.per_kind.items())
    for kind, methods in rows + [("**all**", res.overall)]:
        t = methods["L4"]
        out.append(
            f"| {kind} | {t.cases} | {t.precision:.2f} | {t.recall:.2f} | {t.f1:.2f} | "
            + " | ".join(_pct(t.top_rate(k)) for k in TOPS)
            + f" | {t.stage_ok / t.cases:.2f} | {_pct(t.iter_ok / t.iter_cases if t.iter_cases else None)}"
            + f" | {t.seconds / t.cases:.2f} |"
        )
    out += [
        "",
        "### L4 and the baselines, all cases",
        "",
        "| method | events P | events R | events F1 | node top-1 | top-3 | top-5 | top-8 | s/case |",
        "|" + "---|" * 9,
    ]
    for name, t in res.overall.items():
        out.append(
            f"| {name} | {t.precision:.2f} | {t.recall:.2f} | {t.f1:.2f} | "
            + " | ".join(_pct(t.top_rate(k)) for k in TOPS)
            + f" | {t.seconds / max(1, t.cases):.3f} |"
        )
    return "\n".join(out)


def summary(res: EvalResult) -> dict:
    t = res.overall.get("L4")
    if t is None:
        return {}
    return {
        "cases": t.cases,
        "events_precision": round(t.precision, 4),
        "events_recall": round(t.recall, 4),
        "events_f1": round(t.f1, 4),
        **{f"node_top{k}": t.top_rate(k) for k in TOPS},
        "stage_accuracy": round(t.stage_ok / t.cases, 4) if t.cases else None,
        "iteration_accuracy": round(t.iter_ok / t.iter_cases, 4) if t.iter_cases else None,
    }


def format_modes(results: dict[str, EvalResult]) -> str:
    """L4's overall figures side by side for several history modes."""
    out = [
        "### L4 by history mode, all cases",
        "",
        "| history | events P | events R | events F1 | node top-1 | top-3 | top-5 | top-8 | stage acc "
        "| iteration acc | s/case |",
        "|" + "---|" * 11,
    ]
    for mode, res in results.items():
        t = res.overall["L4"]
        iteration = t.iter_ok / t.iter_cases if t.iter_cases else None
        out.append(
            f"| {mode} | {t.precision:.2f} | {t.recall:.2f} | {t.f1:.2f} | "
            + " | ".join(_pct(t.top_rate(k)) for k in TOPS)
            + f" | {t.stage_ok / max(1, t.cases):.2f} | {_pct(iteration)}"
            + f" | {t.seconds / max(1, t.cases):.2f} |"
        )
    return "\n".join(out)
