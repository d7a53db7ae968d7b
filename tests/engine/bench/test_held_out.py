"""The corpus of a labelled case and the held-out rules, shared by the stage and the root learners."""

from engine.bench import root_learn, stage_learn
from engine.bench.held_out import corpus_of, held_out


def test_a_case_is_named_by_its_source_prefix() -> None:
    assert corpus_of({"source": "realrun/ddp"}) == "realrun"
    assert corpus_of({"source": "othergen/x"}) == "othergen"
    assert corpus_of({"source": "othergen2/x"}) == "othergen2"
    assert corpus_of({"source": "othergen4/gpu_xid_dbe"}) == "othergen4"
    assert corpus_of({"source": "othergen9/x"}) == "public"  # an unknown prefix is a thread's source
    assert corpus_of({"source": "github/a/b#1"}) == "public"
    assert corpus_of({}) == "synthetic"


def test_a_rule_matches_when_every_key_does() -> None:
    rules = [{"corpus": "public", "wave": 7, "split": "test"}]
    assert held_out({"source": "github/a/b#1", "wave": 7, "split": "test"}, rules)
    assert not held_out({"source": "github/a/b#1", "wave": 7, "split": "dev"}, rules)
    assert not held_out({"source": "othergen4/k", "wave": 7, "split": "test"}, rules)


def test_both_learners_hold_out_every_outsiders_test_half() -> None:
    for rules in (stage_learn.settings()["held_out"], root_learn.settings()["held_out"]):
        for corpus in ("othergen", "othergen2", "othergen3", "othergen4"):
            assert held_out({"source": f"{corpus}/k", "split": "test"}, rules)
            assert not held_out({"source": f"{corpus}/k", "split": "dev"}, rules)


def test_both_learners_hold_out_public_wave_8_test_half_after_first_measured() -> None:
    for rules in (stage_learn.settings()["held_out"], root_learn.settings()["held_out"]):
        assert held_out({"source": "github/a/b#1", "wave": 8, "split": "test"}, rules)
        assert not held_out({"source": "github/a/b#1", "wave": 8, "split": "dev"}, rules)
        assert not held_out({"source": "realrun/ddp", "wave": 8, "split": "dev"}, rules)
