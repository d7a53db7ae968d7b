from engine.model import (
    Diagnosis,
    Event,
    IterationFinding,
    Match,
    NodeFinding,
    StageBasis,
    Stats,
    diagnosis_from_dict,
)


def test_diagnosis_round_trips_through_its_json():
    d = Diagnosis(job_id="job-1", status="matched", matches=[Match("p", "T", "platform", "r", ["l"])],
                  stage="training", events=[Event("t <*>", 0.9, 3, "ERROR", ["n1"], None, ["t 1"])],
                  nodes=[NodeFinding("n1", 0.8, ["t <*>"])], iterations=[IterationFinding(5, 0.7, ["n1"])],
                  stats=Stats(files=2, lines=10), report={"url": "https://r/1"})
    assert diagnosis_from_dict(d.to_dict()) == d
    older = {"job_id": "j", "events": [{"template": "x", "score": 1, "count": 1, "level": None, "nodes": [],
                                        "first_seen": None, "examples": [], "future_field": 1}]}
    assert diagnosis_from_dict(older).events[0].template == "x"


def test_the_stage_basis_is_optional_in_the_json_and_round_trips():
    plain = Diagnosis(job_id="j", stage="training")
    assert "stage_basis" not in plain.to_dict()
    words = Diagnosis(job_id="j", stage="checkpointing", stage_basis=StageBasis("words", 0.31))
    assert words.to_dict()["stage_basis"] == {"source": "words", "probability": 0.31}
    assert diagnosis_from_dict(words.to_dict()) == words
    framed = Diagnosis(job_id="j", stage="teardown", stage_basis=StageBasis("frame"))
    assert framed.to_dict()["stage_basis"] == {"source": "frame"}  # no probability where no model answered
    assert diagnosis_from_dict(framed.to_dict()) == framed
    # a basis this reader does not know (a newer writer's) is dropped, not guessed at
    assert diagnosis_from_dict({"job_id": "j", "stage_basis": {"source": "oracle"}}).stage_basis is None
    assert diagnosis_from_dict({"job_id": "j", "stage_basis": "words"}).stage_basis is None
