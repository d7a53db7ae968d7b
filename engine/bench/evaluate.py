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

Corpora of real cases (public issue threads, real runs) label more in truth.json: `root_lines`
(the raw lines of the root cause), `source` ("realrun/ddp", "github/pytorch/pytorch#12345") and
`split` ("dev" | "test", chosen before any tuning). When a case has `root_lines` it is also scored
for the root cause first / among the first 3 events (see `engine.bench.rootcause` for when an event
shows a root line), and stage `unknown` is counted apart as abstained (it is never right). Such a
corpus is reported per fault kind and per source (the source up to its "#") against grep over raw
lines (file order and time order) and Error_time (`engine.bench.real_report`). `split` selects
the cases of one half; a case without `split` belongs to "all" only.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.bench.baselines import BASELINES, GREP_ORDERS, grep_events
from engine.bench.rootcause import root_rank
from engine.diagnose import analyze
from engine.known import KnownSignature
from engine.model import Diagnosis, ParsedJob
from engine.parse import parse_jobs

TOPS = (1, 3, 5, 8)
HISTORY_MODES = ("parse", "pool", "none")
SPLITS = ("all", "dev", "test")
ROOT_TOP = 3
# the methods scored on the root cause of real cases besides L4 (events ordered by time of first line)
ROOT_BASELINES = tuple(f"grep-{o}" for o in GREP_ORDERS) + ("error-time",)

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
    stage_cases: int = 0  # cases this method gave a stage for
    stage_abstained: int = 0  # ... of which it said `unknown`
    root_cases: int = 0  # cases with truth `root_lines`
    root_first: int = 0
    root_top: int = 0  # the root among the first ROOT_TOP events

    def add_root(self, rank: int | None) -> None:
        self.root_cases += 1
        self.root_first += int(rank == 1)
        self.root_top += int(rank is not None and rank <= ROOT_TOP)

    def rate(self, hits: int, of: int) -> float | None:
        return hits / of if of else None

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


def case_dirs(root: Path, split: str = "all") -> list[Path]:
    """The case folders of `root` (cases.json order, else by name); with `split` dev or test, those
    whose truth.json names that split."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} (one of {', '.join(SPLITS)})")
    dirs = _all_case_dirs(root)
    if split == "all":
        return dirs
    return [d for d in dirs if json.loads((d / "truth.json").read_text()).get("split") == split]


def history_dirs(case: Path) -> list[Path]:
    """The succeeded jobs of a case: `history/<job>/` folders, or `history-*/` beside `failed/`."""
    nested = case / "history"
    jobs = sorted(p for p in nested.iterdir() if p.is_dir()) if nested.is_dir() else []
    return jobs + sorted(p for p in case.glob("history-*") if p.is_dir())


def parse_case(case: Path) -> list[ParsedJob]:
    """A case's failed job and its succeeded jobs (`history_dirs`), parsed together as `l4 diagnose` parses
    a job and its history: the failed job first."""
    return parse_jobs([case / "failed", *history_dirs(case)])


def diagnose_case(case: Path, known: Sequence[KnownSignature] = ()) -> tuple[list[ParsedJob], Diagnosis]:
    """`parse_case`, then the diagnosis `l4 bench eval` scores (the failed job against its history, the
    fault library's `known` signatures as ranking evidence)."""
    parsed = parse_case(case)
    return parsed, analyze(parsed[0], parsed[1:], known=known)


def source_group(truth: dict) -> str:
    """The source a case is tallied under: truth `source` up to its "#" ("github/pytorch/pytorch")."""
    return str(truth.get("source") or "unknown").split("#")[0]


def _all_case_dirs(root: Path) -> list[Path]:
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
    per_source: dict[str, dict[str, Tally]] = field(default_factory=dict)  # source group -> method -> tally
    split: str = "all"
    cases: list[dict] = field(default_factory=list)  # per case: name, kind, source, stages, L4's root rank

    @property
    def real(self) -> bool:
        """Some case labels its root cause (a corpus of real cases: report it as such)."""
        return any(t.root_cases for t in self.overall.values())


def evaluate(root: Path, on_case: Callable[[str, dict], None] | None = None, *,
             history_mode: str = "parse", pool_of: PoolOf = separate_pool, split: str = "all",
             known: Sequence[KnownSignature] = ()) -> EvalResult:
    """Score every case of `root` (of one `split`). s/case counts parsing and analysing the failed
    job (with its history in ``parse`` mode), not building the pool in ``pool`` mode (learning
    happens offline). `known`: fault signatures the engine's ranking reads (`engine.known`; the
    CLI passes the knowledge base's library unless told not to)."""
    if history_mode not in HISTORY_MODES:
        raise ValueError(f"unknown history mode {history_mode!r} (one of {', '.join(HISTORY_MODES)})")
    per_kind: dict[str, dict[str, Tally]] = defaultdict(lambda: defaultdict(Tally))
    per_source: dict[str, dict[str, Tally]] = defaultdict(lambda: defaultdict(Tally))
    overall: dict[str, Tally] = defaultdict(Tally)
    cases: list[dict] = []
    for case in case_dirs(root, split):
        truth = json.loads((case / "truth.json").read_text())
        history = history_dirs(case)
        normal = pool_of(case / "failed", history) if history_mode == "pool" else set()
        t0 = time.perf_counter()
        if history_mode == "parse":
            parsed, diagnosis = diagnose_case(case, known)
        else:
            parsed = parse_jobs([case / "failed"])
            diagnosis = analyze(parsed[0], normal=normal, known=known)
        secs = time.perf_counter() - t0
        results = {
            "L4": (
                [(e.template, e.examples) for e in diagnosis.events],
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
                [(failed.templates[i].template, failed.templates[i].examples) for i in ids],
                nodes,
                None,
                None,
                time.perf_counter() - t1,
            )
        roots = truth.get("root_lines") or []
        if roots:
            for order in GREP_ORDERS:
                t1 = time.perf_counter()
                events = grep_events(case / "failed", order)
                results[f"grep-{order}"] = (events, None, None, None, time.perf_counter() - t1)
        ranks: dict[str, int | None] = {}
        groups = [per_kind[truth["kind"]], overall] + ([per_source[source_group(truth)]] if roots else [])
        for name, (events, nodes, stage, iteration, s) in results.items():
            if roots and (name == "L4" or name in ROOT_BASELINES):
                ranks[name] = root_rank(events, roots)
            for tallies in groups:
                tally = tallies[name]
                tally.cases += 1
                tally.seconds += s
                tally.add_events([ex for _, ex in events], truth)
                if nodes is not None:  # grep ranks no nodes
                    tally.add_nodes(nodes, truth)
                if stage is not None:
                    tally.stage_cases += 1
                    tally.stage_abstained += int(stage == "unknown")
                    if stage == truth["stage"]:
                        tally.stage_ok += 1
                if truth.get("iteration") is not None and name == "L4":
                    tally.iter_cases += 1
                    tally.iter_ok += int(iteration == truth["iteration"])
                if name in ranks:
                    tally.add_root(ranks[name])
        basis = diagnosis.stage_basis
        cases.append({"case": case.name, "kind": truth["kind"], "source": truth.get("source"),
                      "stage": diagnosis.stage, "truth_stage": truth["stage"],
                      "stage_basis": None if basis is None else basis.source,
                      "stage_probability": None if basis is None else basis.probability,
                      **({"root_rank": ranks.get("L4")} if roots else {})})
        if on_case:
            info = {
                "kind": truth["kind"],
                "stage": diagnosis.stage,
                "truth_stage": truth["stage"],
                "stage_basis": None if basis is None else basis.source,
                "nodes": [n.node for n in diagnosis.nodes[:3]],
                "faulty": truth["faulty_nodes"],
                "seconds": round(secs, 2),
            }
            if roots:
                info["root_rank"] = {name: r for name, r in ranks.items()}
            on_case(case.name, info)
    return EvalResult(per_kind={k: dict(v) for k, v in per_kind.items()}, overall=dict(overall),
                      per_source={k: dict(v) for k, v in per_source.items()}, split=split, cases=cases)


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
        **(_real_summary(res) if res.real else {}),
    }


def _real_summary(res: EvalResult) -> dict:
    def figures(t: Tally) -> dict:
        return {"root_first": _round(t.rate(t.root_first, t.root_cases)),
                f"root_top{ROOT_TOP}": _round(t.rate(t.root_top, t.root_cases)),
                "events_f1": round(t.f1, 4)}

    t = res.overall["L4"]
    return {
        "split": res.split,
        "root_cases": t.root_cases,
        "root_first": _round(t.rate(t.root_first, t.root_cases)),
        f"root_top{ROOT_TOP}": _round(t.rate(t.root_top, t.root_cases)),
        "stage_abstained": _round(t.rate(t.stage_abstained, t.cases)),
        "baselines": {name: figures(res.overall[name]) for name in ROOT_BASELINES if name in res.overall},
        "per_source": {src: {"cases": m["L4"].cases, **figures(m["L4"])}
                       for src, m in sorted(res.per_source.items())},
    }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


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
