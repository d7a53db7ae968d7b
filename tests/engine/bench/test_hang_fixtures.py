"""The committed real hang cases (tests/fixtures/hang, made by `l4 bench hangrun`)."""
import json
from pathlib import Path

from engine.bench.hang_eval import evaluate_hangs, hang_cases

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hang"


def test_the_corpus_is_well_formed():
    cases = hang_cases(FIXTURES)
    assert len(cases) >= 12
    for case in cases:
        truth = json.loads((case / "truth.json").read_text())
        assert truth["split"] in ("dev", "test") and truth["kind"].startswith("hang/")
        nodes = {p.name for p in (case / "failed").iterdir() if p.name.startswith("node-")}
        assert len(nodes) >= 4 and set(truth["faulty_nodes"]) <= nodes


def test_the_stuck_ranks_node_is_first_in_every_case_and_the_collective_is_named():
    tallies = evaluate_hangs(FIXTURES)
    all_ = tallies["all"]
    assert all_.cases >= 12
    assert all_.top1_with == all_.cases
    assert all_.rank_named == all_.cases and all_.collective_named == all_.cases
    # the logs alone miss some of them: the dumps are what names the rank there
    assert all_.top1_without < all_.cases
