"""``python -m kb.bench_signals SUITE``: do the signal patterns name the right node on generated
(or real-run) jobs, and stay quiet on their succeeded history jobs?

SUITE is a folder made by ``l4 bench generate SUITE --kinds node_hang,node_crash,straggler,fabric_stall``
(any kinds) or the real-run corpus (``tests/fixtures/realrun``: same ``cases.json`` / ``truth.json``
layout). For each case the failed job is parsed with its history jobs and its signal matches are
computed with the built-in line library, twice:

- ``signals``: on all of the failed job's events. A case whose truth names one faulty node is right
  when the first node a signal names is that node; a case without a faulty node is right when the
  first signal is a job-wide one (names no node) of the truth's category.
- ``triage``: what ``bot.triage`` reports: the events no history job shows, and signals only when no
  root line pattern matches them (a line root, e.g. an Xid, is the better answer).

``fired`` counts cases where any signal fired (on a kind that needs no signal: false alarms). Every
history job must match no signal. ``--targets a,b`` splits the summary into those kinds and the
rest (negatives: any signal there is a false alarm).
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from kb import KbError
from kb.bench_library import guarded

_KEYS = ("cases", "right", "fired", "triage_right", "triage_fired", "history", "history_fired")


def _right(found: list, truth: dict) -> bool:
    from kb.signals import suspect_node

    nodes = truth.get("faulty_nodes") or []
    if len(nodes) == 1:
        return suspect_node(found) == nodes[0]
    return bool(found) and suspect_node(found[:1]) is None and found[0].category == truth.get("category")


def evaluate_suite(suite: Path, targets: list[str] | None = None) -> dict[str, Any]:
    from engine.filter import candidate_events, normal_pool
    from engine.parse import parse_jobs
    from kb import library
    from kb.matcher import Matcher
    from kb.signals import match_signals, suspect_node

    index_file = Path(suite) / "cases.json"
    try:
        index = json.loads(index_file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise KbError(f"cannot read {index_file}: {exc}") from None
    matcher = Matcher(library.builtin_patterns())
    per_kind: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(_KEYS, 0))
    wrong = []
    for case in index:
        d = Path(suite) / case["path"]
        truth = json.loads((d / "truth.json").read_text(encoding="utf-8"))
        hdir = d / "history"
        history = sorted(p for p in hdir.iterdir() if p.is_dir()) if hdir.is_dir() else []
        parsed = parse_jobs([d / "failed", *history])
        k = per_kind[truth["kind"]]
        for h in parsed[1:]:
            k["history"] += 1
            k["history_fired"] += bool(match_signals(h, matcher))
        failed = parsed[0]
        found = match_signals(failed, matcher)
        fresh = [failed.templates[i] for i in candidate_events(failed, normal_pool(parsed[1:]))]
        roots = [m for m in matcher.match_templates(fresh) if m.kind == "root"]
        shown = [] if roots else match_signals(failed, matcher, fresh)
        k["cases"] += 1
        k["fired"] += bool(found)
        k["triage_fired"] += bool(shown)
        k["right"] += _right(found, truth)
        k["triage_right"] += _right(shown, truth)
        if not _right(found, truth) and (found or truth.get("faulty_nodes")):
            wrong.append({"case": case["path"], "kind": truth["kind"],
                          "want": (truth.get("faulty_nodes") or [None])[0], "got": suspect_node(found),
                          "signals": [m.pattern_id for m in found],
                          "line_roots": sorted({m.pattern_id for m in roots})[:3]})
    rep: dict[str, Any] = {"kinds": dict(per_kind), "total": _sum(per_kind.values()), "wrong": wrong}
    if targets:
        rep["targets"] = _sum(v for kind, v in per_kind.items() if kind in targets)
        rep["negatives"] = _sum(v for kind, v in per_kind.items() if kind not in targets)
    return rep


def _sum(rows: Any) -> dict[str, int]:
    rows = list(rows)
    return {key: sum(v[key] for v in rows) for key in _KEYS}


def _row(name: str, v: dict[str, int]) -> str:
    n = v["cases"] or 1
    return (f"{name:<24} {v['cases']:>5} {v['right'] / n:>7.1%} {v['fired']:>6} "
            f"{v['triage_right'] / n:>8.1%} "
            f"{v['triage_fired']:>7} {v['history']:>8} {v['history_fired']:>6}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kb.bench_signals", description=__doc__.split("\n\n")[0])
    ap.add_argument("suite", type=Path, help="folder made by `l4 bench generate`, or tests/fixtures/realrun")
    ap.add_argument("--targets", help="comma-separated kinds the signals are for; the others are negatives")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    targets = [k for k in (args.targets or "").split(",") if k]
    rep = guarded(evaluate_suite, args.suite, targets or None)
    if rep is None:
        return 2
    if args.json:
        print(json.dumps(rep, indent=2))
        return 0
    print(f"{'kind':<24} {'cases':>5} {'right':>7} {'fired':>6} {'triage':>8} {'t.fired':>7} "
          f"{'history':>8} {'fired':>6}")
    for kind, v in sorted(rep["kinds"].items()):
        print(_row(kind, v))
    for name in ("targets", "negatives"):
        if name in rep:
            print(_row(f"[{name}]", rep[name]))
    print(_row("all", rep["total"]))
    for w in rep["wrong"]:
        print(f"wrong: {w}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
