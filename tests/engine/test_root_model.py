"""The features a learned order of the root cause reads, on a real parsed job."""
from engine.bench.root_learn import hand_order
from engine.diagnose import diagnose
from engine.parse import parse_jobs
from engine.root_model import HEAD, RootModel, family, features
from tests.helpers.jobs import make_job

FAULT = ("Traceback (most recent call last):",
         '  File "train.py", line 42, in <module>',
         "    loss.backward()",
         "RuntimeError: CUDA error: uncorrectable ECC error encountered")


def test_features_describe_the_first_events_of_the_hand_order(tmp_path):
    job = make_job(tmp_path / "job", fault_lines=FAULT)
    parsed = parse_jobs([job])[0]
    scored = hand_order(parsed, [])
    feats = features(parsed, scored)
    assert len(feats) == min(HEAD, len(scored))
    first = feats[0]
    assert "ECC" in parsed.templates[scored[0].id].template
    assert first["hand_first"] == 1.0 and first["role=none"] == 1.0 and first["has_root"] == 1.0
    assert first["in_traceback"] == 1.0 and first["first_own_severe"] == 1.0
    assert first["specificity"] == 1.0  # one node of four
    watchdog = next(f for e, f in zip(scored[:HEAD], feats, strict=True)
                    if "Watchdog" in parsed.templates[e.id].template)
    assert watchdog["role=cascade"] == 1.0 and watchdog["nodes_share"] == 0.75
    # the hand order `extract` reads is the order `diagnose` reports
    shown = [e.template for e in diagnose(job).events]
    assert shown == [parsed.templates[e.id].template for e in scored[:len(shown)]]


def test_a_family_is_the_lexicon_term_it_matches_most():
    assert family("RuntimeError: CUDA error: an illegal memory access") == "CUDA_error"
    assert family("all good") == "none"


def test_a_linear_order_sums_the_weights_of_the_features_present():
    model = RootModel(1, 3, {"a": 2.0, "b": -1.0})
    assert model.score({"a": 1.0, "b": 1.0, "c": 5.0}) == 1.0
