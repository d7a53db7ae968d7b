"""Is a real-run corpus well formed? (no torch needed: this is what CI runs on the committed fixtures)"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from engine.bench.realrun.plan import kinds
from engine.model import LABELLED_STAGES

REQUIRED = ("case_id", "kind", "category", "stage", "iteration", "faulty_nodes", "indicating",
            "cascade_lines", "context_lines", "root_lines", "source", "split")
STAGES = LABELLED_STAGES


def read_lines(job: Path) -> set[str]:
    """Every raw line of every log file under ``job`` (gzip or plain)."""
    out: set[str] = set()
    for f in job.rglob("*"):
        if not f.is_file() or f.name == "job.json":
            continue
        data = f.read_bytes()
        if f.suffix == ".gz":
            data = gzip.decompress(data)
        out.update(data.decode("utf-8", "replace").split("\n"))
    return out


def check_case(case: Path) -> list[str]:
    """The problems of one case folder (empty when it is well formed)."""
    name = case.name
    try:
        truth = json.loads((case / "truth.json").read_text())
    except (OSError, ValueError) as exc:
        return [f"{name}: unreadable truth.json ({exc})"]
    problems = [f"{name}: truth.json lacks {k!r}" for k in REQUIRED if k not in truth]
    if problems:
        return problems
    spec = kinds()["kinds"].get(truth["kind"])
    if spec is None:
        problems.append(f"{name}: unknown kind {truth['kind']!r}")
    elif truth["category"] != spec["category"] or truth["stage"] != spec["stage"]:
        problems.append(f"{name}: category/stage differ from kinds.yaml")
    if truth["split"] not in ("dev", "test"):
        problems.append(f"{name}: split {truth['split']!r} is neither dev nor test")
    if truth["stage"] not in STAGES:
        problems.append(f"{name}: unknown stage {truth['stage']!r}")
    if not truth["root_lines"]:
        problems.append(f"{name}: no root lines")
    failed = case / "failed"
    if not failed.is_dir():
        return problems + [f"{name}: no failed/ job"]
    lines = read_lines(failed)
    labelled = {"root_lines": truth["root_lines"], "cascade_lines": truth["cascade_lines"],
                "context_lines": truth["context_lines"],
                "indicating": [ln for g in truth["indicating"] for ln in g["lines"]]}
    for key, group in labelled.items():
        missing = [ln for ln in group if ln not in lines]
        if missing:
            problems.append(f"{name}: {len(missing)} {key} not verbatim in the logs, "
                            f"e.g. {missing[0][:80]!r}")
    history = case / "history"
    if not history.is_dir() or not any(p.is_dir() for p in history.iterdir()):
        problems.append(f"{name}: no history job")
    return problems


def check_corpus(root: Path) -> list[str]:
    cases = sorted(p.parent for p in root.glob("*/truth.json"))
    if not cases:
        return [f"no cases in {root}"]
    return [p for c in cases for p in check_case(c)]
