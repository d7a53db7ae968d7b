"""The outsider generator (`l4 bench othergen`): deterministic, its labels verbatim in its files, every kind
and stage covered, a corpus `l4 bench eval` can load."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from bot.cli import main
from engine.bench.evaluate import case_dirs, history_dirs
from engine.bench.othergen import case_kinds, generate_corpus, kinds, split_of

STAGES = {"init", "data_loading", "model_loading", "training", "checkpointing", "teardown"}


def _lines(job: Path) -> dict[str, set[str]]:
    """Physical lines of each file of a job folder (gzip'd or plain), by relative path."""
    out = {}
    for path in sorted(job.rglob("*")):
        if not path.is_file() or path.name == "job.json":
            continue
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        out[str(path.relative_to(job))] = set(data.decode("utf-8").split("\n"))
    return out


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """One case of every fault kind."""
    root = tmp_path_factory.mktemp("othergen")
    generate_corpus(root, len(kinds()), seed=3)
    return root


def test_same_seed_same_bytes_other_seed_other_cases(tmp_path):
    generate_corpus(tmp_path / "a", 2, seed=11)
    generate_corpus(tmp_path / "b", 2, seed=11)
    generate_corpus(tmp_path / "c", 2, seed=12)
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")
    assert _tree(tmp_path / "a") != _tree(tmp_path / "c")


def test_forty_cases_cover_every_kind_and_stage_and_both_causes():
    catalogue = kinds()
    chosen = case_kinds(40, seed=1)
    assert len(catalogue) >= 12
    assert set(chosen) == set(catalogue)
    assert {catalogue[k]["stage"] for k in chosen} == STAGES
    categories = {catalogue[k]["category"] for k in chosen}
    assert any(c.startswith("hardware/") for c in categories)
    assert any(not c.startswith("hardware/") for c in categories)


def test_root_cascade_and_context_lines_stand_verbatim_in_the_failed_job(corpus):
    for case in case_dirs(corpus):
        truth = json.loads((case / "truth.json").read_text())
        files = _lines(case / "failed")
        every = set().union(*files.values())
        assert truth["root_lines"], case.name
        for line in truth["root_lines"] + truth["cascade_lines"] + truth["context_lines"]:
            assert line in every, (case.name, line)
        assert set(truth["root_lines"]).isdisjoint(truth["cascade_lines"] + truth["context_lines"])
        indicating = {ln for g in truth["indicating"] for ln in g["lines"]}
        assert indicating == set(truth["root_lines"]), case.name
        for hist in history_dirs(case):  # the succeeded jobs never show the fault
            normal = set().union(*_lines(hist).values())
            assert normal.isdisjoint(truth["root_lines"]), (case.name, hist.name)


def test_truth_fields_nodes_and_layout(corpus):
    for case in case_dirs(corpus):
        truth = json.loads((case / "truth.json").read_text())
        assert truth["source"] == f"othergen/{truth['kind']}"
        assert truth["stage"] in STAGES
        nodes = {p.name for p in (case / "failed").iterdir() if p.is_dir()}
        assert 4 <= len(nodes) <= 16
        assert set(truth["faulty_nodes"]) <= nodes
        if truth["category"].startswith("hardware/"):
            assert len(truth["faulty_nodes"]) == 1, case.name
        assert (truth["iteration"] is None) == (truth["kind"] != "nan_grad_norm")
        manifest = json.loads((case / "failed" / "job.json").read_text())
        assert manifest["status"] == "failed"
        for hist in history_dirs(case):
            other = json.loads((hist / "job.json").read_text())
            assert other["status"] == "succeeded" and other["settings"] == manifest["settings"]


def test_the_loader_finds_the_cases_and_their_splits(corpus):
    found = case_dirs(corpus)
    index = json.loads((corpus / "cases.json").read_text())["cases"]
    assert [d.name for d in found] == [c["case_dir"] for c in index]
    dev, test = case_dirs(corpus, "dev"), case_dirs(corpus, "test")
    assert sorted(dev + test) == sorted(found) and dev and test
    for d in found:
        assert json.loads((d / "truth.json").read_text())["split"] == split_of(d.name)
        assert split_of(d.name) == ("dev" if hashlib.sha256(d.name.encode()).digest()[0] % 2 == 0 else "test")
        assert 2 <= len(history_dirs(d)) <= 3


def test_cli_writes_a_corpus_and_rejects_no_cases(tmp_path, capsys):
    assert main(["bench", "othergen", str(tmp_path / "og"), "--cases", "1", "--seed", "5"]) == 0
    assert "generated 1 cases" in capsys.readouterr().out
    assert len(case_dirs(tmp_path / "og")) == 1
    assert main(["bench", "othergen", str(tmp_path / "og"), "--cases", "0"]) == 2
    assert "--cases" in capsys.readouterr().err
