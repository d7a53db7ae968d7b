"""The second outsider's generator (`l4 bench othergen2`): same seed, same bytes; labels verbatim in the
files they name; every kind and stage in 40 cases; the cases load the way `l4 bench eval` reads them."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.bench.evaluate import case_dirs, history_dirs
from engine.bench.othergen2 import generate_corpus
from engine.bench.othergen2.catalogue import KINDS, STAGES
from engine.bench.othergen2.corpus import plan, split_of
from tests.helpers.corpora import tree_bytes
from tests.helpers.wait import WAIT


def _text(path: Path) -> str:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    return data.decode("utf-8")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("og2")
    generate_corpus(out, len(KINDS), seed=7)
    return out


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    generate_corpus(tmp_path / "a", 2, seed=3)
    generate_corpus(tmp_path / "b", 2, seed=3)
    generate_corpus(tmp_path / "c", 2, seed=4)
    a = tree_bytes(tmp_path / "a")
    assert a == tree_bytes(tmp_path / "b")
    assert a != tree_bytes(tmp_path / "c")


def test_forty_cases_hold_every_kind_and_stage() -> None:
    faults = plan(40, seed=1)
    assert {f["kind"] for f in faults} == set(KINDS)
    assert {f["stage"] for f in faults} == set(STAGES)
    assert len(KINDS) >= 14


def test_labels_stand_verbatim_in_the_files(corpus: Path) -> None:
    seen_kinds, seen_stages, shapes_seen = set(), set(), set()
    for case in case_dirs(corpus):
        truth = json.loads((case / "truth.json").read_text())
        seen_kinds.add(truth["kind"])
        seen_stages.add(truth["stage"])
        shapes_seen.add(truth["shape"])
        assert truth["source"] == f"othergen2/{truth['kind']}"
        assert truth["split"] == split_of(case.name)
        assert truth["root_lines"] and truth["indicating"]
        lines: set[str] = set()
        for f in (case / "failed").rglob("*"):
            if f.is_file() and f.name != "job.json":
                lines.update(_text(f).split("\n"))
        for root in truth["root_lines"]:
            assert root in lines, (case.name, root)
        for group in truth["indicating"]:
            assert all(ln in lines for ln in group["lines"]), (case.name, group["key"])
        assert all(ln in lines for ln in truth["cascade_lines"] + truth["context_lines"])
        assert set(truth["root_lines"]) <= {ln for g in truth["indicating"] for ln in g["lines"]}
        if truth["category"].startswith("hardware/"):
            assert truth["faulty_nodes"] and (case / "failed" / truth["faulty_nodes"][0]).is_dir()
        if truth["stage"] == "training" and truth["kind"] != "scheduler_preemption":
            assert isinstance(truth["iteration"], int)
    assert seen_kinds == set(KINDS)
    assert seen_stages == set(STAGES)
    assert shapes_seen == {"k8s", "slurm", "bare"}


def test_history_jobs_succeeded_and_carry_no_fault(corpus: Path) -> None:
    for case in case_dirs(corpus):
        history = history_dirs(case)
        assert 2 <= len(history) <= 3
        truth = json.loads((case / "truth.json").read_text())
        failed = json.loads((case / "failed" / "job.json").read_text())
        for h in history:
            manifest = json.loads((h / "job.json").read_text())
            assert manifest["status"] == "succeeded" and manifest["settings"] == failed["settings"]
            text = "\n".join(_text(f) for f in h.rglob("*") if f.is_file() and f.name != "job.json")
            assert not any(root.split("] ")[-1][-60:] in text for root in truth["root_lines"])


def test_loader_finds_cases_and_splits(corpus: Path) -> None:
    everything = case_dirs(corpus)
    assert len(everything) == len(KINDS)
    dev, test = case_dirs(corpus, "dev"), case_dirs(corpus, "test")
    assert sorted(dev + test) == sorted(everything)
    assert all(split_of(d.name) == "dev" for d in dev)


def test_cli_writes_a_corpus(tmp_path: Path) -> None:
    out = tmp_path / "cli"
    done = subprocess.run([sys.executable, "-m", "bot.cli", "bench", "othergen2", str(out), "--cases", "1",
                           "--seed", "5"], capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 0, done.stderr
    assert "generated 1 cases" in done.stdout
    assert len(case_dirs(out)) == 1
    bad = subprocess.run([sys.executable, "-m", "bot.cli", "bench", "othergen2", str(out), "--cases", "0"],
                         capture_output=True, text=True, timeout=WAIT)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0
