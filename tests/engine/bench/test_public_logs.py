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
WAVE2 = CORPUS / "_wave2"


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
    assert t.get("wave", 1) in (1, 2)


def test_sources_md_lists_every_case():
    text = (CORPUS / "SOURCES.md").read_text()
    for case in CASES:
        assert f"| {case.name} |" in text and _truth(case)["url"] in text


def test_wave2_is_a_second_held_out_set_with_a_view_of_its_own():
    """Wave 2 (collected after the first 50 were used for tuning) loads with the whole corpus and,
    alone, through the `_wave2/` view of links, so `l4 bench eval` can score either."""
    wave2 = sorted(c.name for c in CASES if _truth(c).get("wave") == 2)
    assert len(wave2) >= 30 and len(CASES) - len(wave2) == 50
    view = case_dirs(WAVE2)
    assert sorted(d.name for d in view) == wave2
    assert all(d.is_symlink() and d.resolve() == (CORPUS / d.name).resolve() for d in view)
    rows = json.loads((WAVE2 / "cases.json").read_text())
    assert [r["case_id"] for r in rows] == [d.name for d in view]
    for row in rows:
        t = _truth(CORPUS / row["case_id"])
        assert (row["split"], row["kind"], row["stage"], row["source"]) == (
            t["split"], t["kind"], t["stage"], t["source"])
    assert [d.name for d in case_dirs(WAVE2, "test")] == [r["case_id"] for r in rows if r["split"] == "test"]
    splits = [r["split"] for r in rows]
    assert abs(splits.count("dev") - splits.count("test")) <= len(rows) // 4
    assert {r["stage"] for r in rows} == set(STAGES) - {"unknown"}
    assert all(sum(f.stat().st_size for f in (CORPUS / r["case_id"]).rglob("*") if f.is_file()) < 32_000
               for r in rows)


def test_sources_md_has_a_wave2_note_and_counts():
    text = (CORPUS / "SOURCES.md").read_text()
    n = sum(_truth(c).get("wave") == 2 for c in CASES)
    assert f"Wave 2: {n} cases" in text


def test_the_corpus_evaluates():
    res = evaluate(CORPUS, split="test")
    assert res.real and res.overall["L4"].root_cases == sum(_truth(c)["split"] == "test" for c in CASES)
    assert {"grep-file", "grep-time", "error-time"} <= set(res.overall)
