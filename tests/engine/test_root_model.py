"""The learned re-ordering of the scored events: features of real parsed jobs, the order, the hook."""
import json

import pytest

from engine import root_model
from engine.diagnose import diagnose
from engine.events import score_events, select_events
from engine.filter import candidate_events
from engine.parse import parse_jobs
from engine.root_model import HEAD, RootModel, capture, features, model_from_dict, order, reorder
from tests.helpers.jobs import make_job

FAULT = ("Traceback (most recent call last):",
         '  File "train.py", line 42, in <module>',
         "    loss.backward()",
         "RuntimeError: CUDA error: uncorrectable ECC error encountered")


def _scored(tmp_path):
    job = make_job(tmp_path / "job", fault_lines=FAULT)
    parsed = parse_jobs([job])[0]
    with capture():
        scored = score_events(parsed, candidate_events(parsed, set()))
    return parsed, scored


def test_features_describe_the_first_events_of_the_hand_order(tmp_path):
    parsed, scored = _scored(tmp_path)
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


def test_order_puts_the_models_best_first_and_keeps_the_hand_scores_by_rank(tmp_path):
    parsed, scored = _scored(tmp_path)
    # a model that prefers cascades: the watchdog line comes first, with the best hand score
    model = RootModel(1, top_k=5, weights={"role=cascade": 5.0}, apply=True)
    out = order(parsed, scored, model)
    assert "Watchdog" in parsed.templates[out[0].id].template
    assert [e.score for e in out] == [e.score for e in scored]
    assert sorted(e.id for e in out) == sorted(e.id for e in scored)
    assert len(select_events(out)) == len(select_events(scored))  # the same number kept


def test_the_hook_leaves_the_hand_order_unless_the_shipped_model_applies(tmp_path, monkeypatch):
    parsed, scored = _scored(tmp_path)
    monkeypatch.setattr(root_model, "load_model", lambda: RootModel(1, 5, {"role=cascade": 5.0}, apply=False))
    assert reorder(parsed, scored) == scored
    monkeypatch.setattr(root_model, "load_model", lambda: RootModel(1, 5, {"role=cascade": 5.0}, apply=True))
    assert reorder(parsed, scored)[0].role == "cascade"
    with capture() as got:
        assert reorder(parsed, scored) == scored
    assert got == [(parsed, scored)]


def test_the_shipped_model_file_loads_and_diagnose_runs_with_it(tmp_path):
    model = root_model.load_model()
    if model is not None:
        assert model.top_k >= 2 and model.weights
    d = diagnose(make_job(tmp_path / "job", fault_lines=FAULT))
    assert any("ECC" in e.template for e in d.events[:3])


def test_a_malformed_model_file_is_a_clear_error():
    with pytest.raises(ValueError, match="top_k"):
        model_from_dict(json.loads('{"weights": {}}'))
