"""The learned root severity (engine/root_severity.py): features, the lift, the model file."""
import json

import pytest

from engine.model import TemplateStat
from engine.root_severity import MODEL_VERSION, NO_LIFT, LiftModel, learned_severity, model_from_dict, shape


def test_shape_reads_words_split_from_camel_case_and_the_lines_shape():
    f = shape("src/tcmalloc.cc:<*>] Attempt to free invalid pointer <*>", None, 0.1)
    assert f["w=attempt"] == f["w=pointer"] == 1.0 and f["negation"] == 1.0 and f["source_at"] == 1.0
    assert f["level=none"] == 1.0 and f["lexicon"] == 0.1 and f["exc_head"] == 0.0
    g = shape("ProcessRaisedException: boom", "ERROR", 0.8)
    assert g["w=raised"] == 1.0 and g["w=exception"] == 1.0 and g["exc_head"] == 1.0 and g["lexicon_severe"]


def test_a_likely_root_is_lifted_never_lowered_and_routine_levels_stay_capped():
    model = LiftModel(MODEL_VERSION, {"w=pointer": 5.0}, -2.0, 0.9, 0.6)
    assert model.severity("Attempt to free invalid pointer <*>", None, 0.1) == 0.6
    assert model.severity("Attempt to free invalid pointer <*>", "INFO", 0.1) == 0.0
    assert model.severity("iter <*> loss <*>", None, 0.1) == 0.0  # p = 0.12 < 0.9
    assert model.severity("free invalid pointer", None, 0.8) == 0.0  # severe already
    t = TemplateStat(template="free invalid pointer <*>", level=None)
    assert learned_severity(t, 0.1, model) == 0.6 and learned_severity(t, 0.1, NO_LIFT) == 0.0
    frame = TemplateStat(template='File "<*>", line <*>, in free_invalid_pointer', level=None)
    assert learned_severity(frame, 0.03, model) == 0.0  # a damped shape (a frame) is never lifted


def test_the_model_file_round_trips_and_a_foreign_version_is_refused():
    model = LiftModel(MODEL_VERSION, {"w=x": 1.5}, -0.5, 0.8, 0.5)
    assert model_from_dict(json.loads(json.dumps(model.to_dict()))) == model
    with pytest.raises(ValueError, match="version"):
        model_from_dict({**model.to_dict(), "version": 99})
