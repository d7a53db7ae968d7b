"""`l4 bench hang`: the hang cases diagnosed with and without their dumps, side by side.

A case folder holds `failed/` (rank logs plus flight-recorder and stack dumps), `history-*/` and a
`truth.json` with `faulty_nodes`, `stuck_ranks` and `collective` (what `l4 bench hangrun` writes).
Per case: is the stuck rank's node first (top-1) with the dumps and from the logs alone, and does the
`hang` section name the stuck rank and the collective.
"""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from engine.diagnose import analyze
from engine.parse import parse_jobs


@dataclass
class HangTally:
    cases: int = 0
    top1_with: int = 0
    top1_without: int = 0
    rank_named: int = 0
    collective_named: int = 0
    names: list[str] = field(default_factory=list)


def hang_cases(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if (p / "truth.json").is_file() and (p / "failed").is_dir())


def evaluate_hangs(root: Path, split: str = "all") -> dict[str, HangTally]:
    """Tallies per fault kind and "all" over the cases under `root` (`split`: dev, test or all)."""
    tallies: dict[str, HangTally] = defaultdict(HangTally)
    for case in hang_cases(root):
        truth = json.loads((case / "truth.json").read_text())
        if split != "all" and truth.get("split") != split:
            continue
        history = sorted(p for p in case.iterdir() if p.name.startswith("history") and p.is_dir())
        parsed = parse_jobs([case / "failed", *history])
        with_dumps = analyze(parsed[0], parsed[1:])
        logs_only = analyze(parsed[0], parsed[1:], hang_evidence=False)
        faulty = set(truth.get("faulty_nodes") or [])
        hang = with_dumps.hang
        for t in (tallies[truth["kind"]], tallies["all"]):
            t.cases += 1
            t.top1_with += int(bool(with_dumps.nodes) and with_dumps.nodes[0].node in faulty)
            t.top1_without += int(bool(logs_only.nodes) and logs_only.nodes[0].node in faulty)
            t.rank_named += int(hang is not None and set(truth.get("stuck_ranks") or []) <= set(hang.ranks)
                                and bool(hang.ranks))
            t.collective_named += int(hang is not None and bool(hang.collective)
                                      and str(truth.get("collective", "")) in str(hang.collective))
            t.names.append(case.name)
    return dict(tallies)


def format_hangs(tallies: dict[str, HangTally]) -> str:
    out = ["| kind | cases | node top-1 with dumps | node top-1 logs only | stuck rank named "
           "| collective named |", "|---|---|---|---|---|---|"]
    for kind in sorted(k for k in tallies if k != "all") + ["all"]:
        t = tallies[kind]
        name = "**all**" if kind == "all" else kind
        out.append(f"| {name} | {t.cases} | {t.top1_with / t.cases:.2f} | {t.top1_without / t.cases:.2f} | "
                   f"{t.rank_named / t.cases:.2f} | {t.collective_named / t.cases:.2f} |")
    return "\n".join(out)
