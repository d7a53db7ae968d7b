"""The held-out field lines and the bench command that measures the library on them."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kb import KbError, library
from kb.bench_library import DEFAULT_FILE, evaluate, load_field_lines, split_of
from kb.matcher import Matcher
from tests.helpers.wait import WAIT

REPO = Path(__file__).resolve().parents[2]


def test_field_lines_are_many_sourced_and_split_by_hash() -> None:
    rows = load_field_lines()
    assert len(rows) >= 150
    assert all(r["source"] and r["note"] for r in rows)
    assert {r["split"] for r in rows} == {"dev", "test"}
    assert all(r["split"] == split_of(r["line"]) for r in rows)
    assert len({r["id"] for r in rows}) == len(rows)


def test_field_lines_exclude_the_lines_the_library_was_first_written_from() -> None:
    dev_cases = Path(__file__).resolve().parent / "fixtures" / "real_cases_dev.jsonl"
    seen = set()
    for raw in dev_cases.read_text(encoding="utf-8").splitlines():
        case = json.loads(raw)
        seen.update(" ".join(x.split()) for x in case["indicating_lines"] + case["context_lines"])
    assert not [r["id"] for r in load_field_lines() if " ".join(r["line"].split()) in seen]


def test_load_rejects_a_row_whose_split_was_edited(tmp_path: Path) -> None:
    row = json.loads(DEFAULT_FILE.read_text(encoding="utf-8").splitlines()[0])
    row["split"] = "dev" if row["split"] == "test" else "test"
    bad = tmp_path / "lines.jsonl"
    bad.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(KbError, match="disagrees with the hash rule"):
        load_field_lines(bad)
    bad.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(KbError, match="not JSON"):
        load_field_lines(bad)
    with pytest.raises(KbError, match="cannot read"):
        load_field_lines(tmp_path / "missing.jsonl")


def test_library_meets_the_field_floors_on_both_halves() -> None:
    rep = evaluate(load_field_lines(), Matcher(library.builtin_patterns()))
    for split in ("dev", "test"):
        matched, exact = rep.splits[split].rates()
        assert matched >= 0.90 and exact >= 0.80, (split, matched, exact)


def test_bench_command_reports_json(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "kb.bench_library", "--json", "--split", "test"],
                         cwd=REPO, capture_output=True, text=True, timeout=WAIT, check=True)
    report = json.loads(out.stdout)
    assert set(report["splits"]) == {"test"}
    assert report["splits"]["test"]["n"] >= 70
    bad = tmp_path / "x.jsonl"
    bad.write_text("[]\n", encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "kb.bench_library", "--file", str(bad)],
                         cwd=REPO, capture_output=True, text=True, timeout=WAIT)
    assert res.returncode == 2 and res.stderr.startswith("error:") and len(res.stderr.splitlines()) == 1
