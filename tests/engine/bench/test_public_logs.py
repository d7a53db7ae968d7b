"""The corpus of real logs from public issue threads (tests/fixtures/public_logs) is well-formed.

Every labeled line is in the case's log files verbatim, every case names its source, split, stage
and category, and the split is the one fixed before any tuning: dev when the first byte of
sha256(case id) is even, else test.
"""
import hashlib
import json
from pathlib import Path

import pytest

from engine.bench.evaluate import case_dirs, evaluate
from engine.model import CATEGORIES, STAGES

CORPUS = Path(__file__).parents[2] / "fixtures" / "public_logs"
CASES = case_dirs(CORPUS)


def _truth(case: Path) -> dict:
    return json.loads((case / "truth.json").read_text())


def _lines(case: Path) -> set[str]:
    return {ln for f in (case / "failed").rglob("*") if f.is_file() for ln in f.read_text().split("\n")}


def test_corpus_is_large_and_split_in_halves():
    splits = [_truth(c)["split"] for c in CASES]
    assert len(CASES) >= 40
    assert abs(splits.count("dev") - splits.count("test")) <= len(CASES) // 5


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case_is_labeled_and_its_lines_are_verbatim(case: Path):
    t = _truth(case)
    assert t["source"].startswith("github/") and "#" in t["source"]
    assert t["url"].startswith("https://github.com/")
    assert t["source"].split("#")[1] == t["url"].rstrip("/").rsplit("/", 1)[1]
    assert t["split"] == ("dev" if hashlib.sha256(case.name.encode()).digest()[0] % 2 == 0 else "test")
    assert t["stage"] in STAGES and t["stage"] != "unknown"
    assert t["category"] in CATEGORIES
    assert t["kind"] and t["root_lines"]
    lines = _lines(case)
    indicating = {ln for g in t["indicating"] for ln in g["lines"]}
    assert set(t["root_lines"]) <= indicating
    for labeled in (indicating, t["cascade_lines"], t["context_lines"]):
        assert set(labeled) <= lines
    assert not indicating & set(t["cascade_lines"])


def test_sources_md_lists_every_case():
    text = (CORPUS / "SOURCES.md").read_text()
    for case in CASES:
        assert f"| {case.name} |" in text and _truth(case)["url"] in text


def test_the_corpus_evaluates():
    res = evaluate(CORPUS, split="test")
    assert res.real and res.overall["L4"].root_cases == sum(_truth(c)["split"] == "test" for c in CASES)
    assert {"grep-file", "grep-time", "error-time"} <= set(res.overall)
