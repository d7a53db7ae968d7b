"""``python -m kb.bench_signals SUITE``: do the signal patterns name the right node on generated
jobs, and stay quiet on their succeeded history jobs?

SUITE is a folder made by ``l4 bench generate SUITE --kinds node_hang,node_crash`` (any kinds; a
case counts only when its truth names one faulty node). For each case the failed job is parsed
alone and its signal matches are computed with the built-in line library; the case is right when
the first node a signal names is the truth's faulty node. Every history job must match no signal.
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from kb import KbError
from kb.bench_library import guarded


def evaluate_suite(suite: Path) -> dict[str, Any]:
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
    per_kind: dict[str, dict[str, int]] = defaultdict(lambda: {"cases": 0, "right_node": 0, "history": 0,
                                                               "history_fired": 0})
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
        if len(truth.get("faulty_nodes") or []) != 1:
            continue
        k["cases"] += 1
        found = match_signals(parsed[0], matcher)
        node = suspect_node(found)
        if node == truth["faulty_nodes"][0]:
            k["right_node"] += 1
        else:
            wrong.append({"case": case["path"], "kind": truth["kind"], "want": truth["faulty_nodes"][0],
                          "got": node, "signals": [m.pattern_id for m in found]})
    total = {key: sum(v[key] for v in per_kind.values()) for key in ("cases", "right_node", "history",
                                                                     "history_fired")}
    return {"kinds": dict(per_kind), "total": total, "wrong": wrong}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kb.bench_signals", description=__doc__.split("\n\n")[0])
    ap.add_argument("suite", type=Path, help="folder made by `l4 bench generate`")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rep = guarded(evaluate_suite, args.suite)
    if rep is None:
        return 2
    if args.json:
        print(json.dumps(rep, indent=2))
        return 0
    print(f"{'kind':<22} {'cases':>5} {'right node':>10} {'history':>8} {'fired':>6}")
    for kind, v in sorted(rep["kinds"].items()):
        rate = v["right_node"] / v["cases"] if v["cases"] else 0.0
        print(f"{kind:<22} {v['cases']:>5} {rate:>10.1%} {v['history']:>8} {v['history_fired']:>6}")
    t = rep["total"]
    rate = t["right_node"] / t["cases"] if t["cases"] else 0.0
    print(f"{'all':<22} {t['cases']:>5} {rate:>10.1%} {t['history']:>8} {t['history_fired']:>6}")
    for w in rep["wrong"]:
        print(f"wrong: {w}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
