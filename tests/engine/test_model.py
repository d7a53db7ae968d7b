from engine.model import Diagnosis, Event, IterationFinding, Match, NodeFinding, Stats, diagnosis_from_dict


def test_diagnosis_round_trips_through_its_json():
    d = Diagnosis(job_id="job-1", status="matched", matches=[Match("p", "T", "platform", "r", ["l"])],
                  stage="training", events=[Event("t <*>", 0.9, 3, "ERROR", ["n1"], None, ["t 1"])],
                  nodes=[NodeFinding("n1", 0.8, ["t <*>"])], iterations=[IterationFinding(5, 0.7, ["n1"])],
                  stats=Stats(files=2, lines=10), report={"url": "https://r/1"})
    assert diagnosis_from_dict(d.to_dict()) == d
    older = {"job_id": "j", "events": [{"template": "x", "score": 1, "count": 1, "level": None, "nodes": [],
                                        "first_seen": None, "examples": [], "future_field": 1}]}
    assert diagnosis_from_dict(older).events[0].template == "x"
