"""The fourth outsider's generator (`l4 bench othergen4`): the same seed gives the same bytes; every
labelled line stands verbatim in a file of the failed job (after decompression); every kind, stage and
shape occurs at 40 cases; the splits follow the case name's hash; the cases load the way `l4 bench eval`
reads them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from engine.bench.evaluate import case_dirs, history_dirs
from engine.bench.othergen4 import generate_corpus
from engine.bench.othergen4.catalogue import STAGES, kinds
from engine.bench.othergen4.corpus import plan, split_of
from engine.bench.othergen4.shapes import SHAPES
from tests.helpers.corpora import assert_same_seed_same_bytes, job_lines, l4, missing_labelled_lines


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("og4")
    generate_corpus(out, len(kinds()), seed=5)
    return out


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    assert_same_seed_same_bytes(generate_corpus, tmp_path)


def test_labelled_lines_stand_verbatim_in_the_failed_job(corpus: Path) -> None:
    for case in case_dirs(corpus):
        truth = json.loads((case / "truth.json").read_text())
        assert truth["root_lines"], case.name
        assert truth["indicating"][0]["lines"], case.name
        missing = missing_labelled_lines(case, truth)
        assert not missing, (case.name, missing[:2])
        # the root's failure-indicating lines are root lines, never noise-like separators
        assert set(truth["indicating"][0]["lines"]) <= set(truth["root_lines"])
        assert not any(set(ln) <= set("-= ") for ln in truth["indicating"][0]["lines"])


def test_no_unfilled_placeholders_and_no_fault_in_history(corpus: Path) -> None:
    slot = re.compile(r"\{[a-z_0-9]+(:[^}]*)?\}")
    for case in case_dirs(corpus):
        truth = json.loads((case / "truth.json").read_text())
        for job in [case / "failed", *history_dirs(case)]:
            for ln in job_lines(job):
                assert not slot.search(ln), (case.name, job.name, ln[:120])
        history = history_dirs(case)
        assert len(history) == 2
        settings = json.loads((case / "failed" / "job.json").read_text())["settings"]
        for h in history:
            meta = json.loads((h / "job.json").read_text())
            assert meta["status"] == "succeeded" and meta["settings"] == settings
            assert not set(truth["root_lines"]) & job_lines(h), (case.name, h.name)


def test_every_kind_stage_and_shape_at_40_cases() -> None:
    plans = plan(40, seed=1)
    assert {p.kind for p in plans} == set(kinds())
    assert {p.shape for p in plans} == set(SHAPES)
    assert {kinds()[p.kind].stage for p in plans} == set(STAGES)
    assert len(kinds()) >= 16
    for p in plans:
        assert p.kind in p.name and p.shape in p.name
        assert 4 <= p.nodes <= 32
    assert plan(40, seed=1) == plans and plan(40, seed=2) != plans


def test_splits_come_from_the_case_name() -> None:
    names = [p.name for p in plan(40, seed=1)]
    splits = [split_of(n) for n in names]
    assert set(splits) == {"dev", "test"}
    assert 10 <= splits.count("dev") <= 30


def test_truth_fields_and_loader(corpus: Path) -> None:
    cases = case_dirs(corpus)
    assert len(cases) == len(kinds())
    assert {json.loads((c / "truth.json").read_text())["kind"] for c in cases} == set(kinds())
    for case in cases:
        truth = json.loads((case / "truth.json").read_text())
        kind = kinds()[truth["kind"]]
        assert truth["split"] == split_of(case.name)
        assert truth["source"] == f"othergen4/{truth['kind']}"
        assert truth["stage"] == kind.stage and truth["category"] == kind.category
        nodes = {p.name for p in (case / "failed").iterdir() if p.is_dir()}
        assert set(truth["faulty_nodes"]) <= nodes
        assert bool(truth["faulty_nodes"]) == (kind.scope != "all")
        if kind.stage in ("training", "checkpointing"):
            assert isinstance(truth["iteration"], int)
        else:
            assert truth["iteration"] is None
    assert {c.name for c in case_dirs(corpus, "dev")} | {c.name for c in case_dirs(corpus, "test")} == {
        c.name for c in cases
    }


def test_hardware_faults_show_on_the_faulty_node_only(corpus: Path) -> None:
    for case in case_dirs(corpus):
        truth = json.loads((case / "truth.json").read_text())
        if not truth["faulty_nodes"]:
            continue
        node = truth["faulty_nodes"][0]
        own = job_lines(case / "failed" / node)
        assert set(truth["indicating"][0]["lines"]) <= own, case.name




def test_cli_writes_a_corpus(tmp_path: Path) -> None:
    out = tmp_path / "c"
    run = l4("bench", "othergen4", str(out), "--cases", "1", "--seed", "2")
    assert run.returncode == 0, run.stderr
    assert "generated 1 cases" in run.stdout
    assert len(case_dirs(out)) == 1
    bad = l4("bench", "othergen4", str(out), "--cases", "0")
    assert bad.returncode == 2 and "--cases" in bad.stderr


def test_every_kind_in_every_shape_it_has_wording_for(tmp_path: Path) -> None:
    """Each (kind, shape) pair makes a well-formed case, not only those a seed's plan happens to draw."""
    from engine.bench.othergen4.corpus import CasePlan, _write_case
    from engine.bench.othergen4.shapes import FRAMEWORK

    n = 0
    for name, kind in kinds().items():
        for shape in SHAPES:
            if FRAMEWORK[shape] not in kind.frameworks:
                continue
            case = _write_case(tmp_path, CasePlan(f"{name}-{shape}-x", name, shape, 4, 1, 7919 * n))
            n += 1
            truth = json.loads((case / "truth.json").read_text())
            lines = job_lines(case / "failed")
            assert truth["indicating"][0]["lines"], case.name
            labelled = truth["root_lines"] + truth["context_lines"] + truth["cascade_lines"]
            assert all(ln in lines for ln in labelled), case.name
            assert (truth["iteration"] is not None) == (kind.stage in ("training", "checkpointing"))
    assert n >= 3 * len(kinds())
