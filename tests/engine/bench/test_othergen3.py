"""The third outsider's generator (`l4 bench othergen3`): the same seed gives the same bytes; every
labelled line stands verbatim in a file of the failed job (after decompression); every kind and stage
occurs; the cases load the way `l4 bench eval` reads them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.bench.evaluate import case_dirs, history_dirs
from engine.bench.othergen3 import generate_corpus
from engine.bench.othergen3.catalogue import STAGES, kinds
from engine.bench.othergen3.corpus import plan, split_of
from tests.helpers.corpora import assert_same_seed_same_bytes, job_lines, l4, missing_labelled_lines


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("og3")
    generate_corpus(out, len(kinds()), seed=5)
    return out


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    assert_same_seed_same_bytes(generate_corpus, tmp_path)


def test_labelled_lines_stand_verbatim_in_the_failed_job(corpus: Path) -> None:
    for case in case_dirs(corpus):
        truth = json.loads((case / "truth.json").read_text())
        assert truth["root_lines"], case.name
        missing = missing_labelled_lines(case, truth)
        assert not missing, (case.name, missing[:2])
        assert set(truth["root_lines"]) <= {ln for g in truth["indicating"] for ln in g["lines"]}


def test_no_unfilled_placeholders_and_no_fault_in_history(corpus: Path) -> None:
    for case in case_dirs(corpus):
        truth = json.loads((case / "truth.json").read_text())
        for job in [case / "failed", *history_dirs(case)]:
            assert not [ln for ln in job_lines(job) if "${" in ln], job
        for h in history_dirs(case):
            assert not set(truth["root_lines"]) & job_lines(h), h
            assert (
                json.loads((h / "job.json").read_text())["settings"]
                == json.loads((case / "failed" / "job.json").read_text())["settings"]
            )


def test_every_kind_and_stage_and_shape(corpus: Path) -> None:
    truths = [json.loads((c / "truth.json").read_text()) for c in case_dirs(corpus)]
    assert {t["kind"] for t in truths} == set(kinds())
    assert {t["stage"] for t in truths} == set(STAGES)
    assert {k.name for _, k in plan(40, 1)} == set(kinds()) and len(kinds()) >= 14
    assert {t["shape"] for t in truths} >= {"ray", "mpi", "sagemaker", "azureml", "msrun"}
    for t in truths:
        assert t["source"] == f"othergen3/{t['kind']}" and t["wording_from"]
        assert (t["iteration"] is not None) == (t["stage"] in ("training", "checkpointing"))
        if t["category"].startswith("hardware/"):
            assert len(t["faulty_nodes"]) == 1


def test_loader_finds_cases_histories_and_splits(corpus: Path) -> None:
    dirs = case_dirs(corpus)
    assert len(dirs) == len(kinds())
    dev, test = case_dirs(corpus, "dev"), case_dirs(corpus, "test")
    assert len(dev) + len(test) == len(dirs) and dev and test
    for d in dirs:
        assert json.loads((d / "truth.json").read_text())["split"] == split_of(d.name)
        assert 2 <= len(history_dirs(d)) <= 3


def test_flat_layout_maps_every_file_to_a_node(corpus: Path) -> None:
    flat = [c for c in case_dirs(corpus) if json.loads((c / "truth.json").read_text())["shape"] == "azureml"]
    assert flat
    for case in flat:
        job = case / "failed"
        meta = json.loads((job / "job.json").read_text())
        mapped = {f for fs in meta["nodes"].values() for f in fs}
        assert mapped == {p.name for p in job.iterdir() if p.name != "job.json"}




def test_cli_writes_a_corpus(tmp_path: Path) -> None:
    out = tmp_path / "c"
    run = l4("bench", "othergen3", str(out), "--cases", "1", "--seed", "2")
    assert run.returncode == 0, run.stderr
    assert "generated 1 cases" in run.stdout
    assert len(case_dirs(out)) == 1
    bad = l4("bench", "othergen3", str(out), "--cases", "0")
    assert bad.returncode == 2 and "--cases" in bad.stderr
