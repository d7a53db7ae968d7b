from __future__ import annotations

import json

import pytest
from sqlmodel import select

from engine.model import Diagnosis, Event, Match, NodeFinding
from kb import KbError, diagnoses, feedback
from kb import db as kbdb
from kb.matcher import load_matcher
from kb.models import FaultPattern, Feedback, NodeIncident

TEMPLATE = "[E <*>] MyStore client lost lease on shard <*> after <*> retries"
RAW = "[E 2026-05-01 10:22:31] MyStore client lost lease on shard 17 after 5 retries"


def _diagnosis(pattern: str | None = None) -> Diagnosis:
    return Diagnosis(
        job_id="job-0042", status="matched" if pattern else "analyzed",
        matches=[Match(pattern_id=pattern, title="t", category="hardware/accelerator")] if pattern else [],
        events=[Event(template=TEMPLATE, score=0.9, count=3, level="ERROR", nodes=["node-3"],
                      first_seen=None, examples=[RAW])],
        nodes=[NodeFinding("node-3", 0.91, [TEMPLATE]), NodeFinding("node-7", 0.5),
               NodeFinding("node-1", 0.2)])


def test_store_writes_json_and_node_incidents(engine) -> None:  # noqa: ANN001
    with kbdb.session(engine) as s:
        did = diagnoses.store(s, _diagnosis("xid-79-fallen-off-bus"), {"model": "m"},
                              slack_channel="C1", slack_thread_ts="123.456")
        s.commit()
    with kbdb.session(engine) as s:
        rec = diagnoses.get(s, did)
        assert rec.matched_pattern_id == "xid-79-fallen-off-bus" and rec.slack_thread_ts == "123.456"
        assert diagnoses.as_dict(rec)["schema"] == "l4.diagnosis/v1"
        assert json.loads(rec.json_text)["nodes"][0]["node"] == "node-3"
        inc = s.exec(select(NodeIncident).order_by(NodeIncident.node)).all()
        assert [(i.node, i.pattern_id) for i in inc] == [("node-3", "xid-79-fallen-off-bus"),
                                                         ("node-7", "xid-79-fallen-off-bus")]
        assert [i.job_id for i in diagnoses.node_history(s, "node-3")] == ["job-0042"]
        diagnoses.attach_slack(s, did, "C2", "9.9")
        s.commit()
        assert diagnoses.get(s, did).slack_channel == "C2"


def test_unknown_matched_pattern_is_not_an_error(sqlite_engine) -> None:  # noqa: ANN001
    with kbdb.session(sqlite_engine) as s:
        did = diagnoses.store(s, _diagnosis("no-such-pattern"), {})
        s.commit()
        assert diagnoses.get(s, did).matched_pattern_id is None


def test_confirm_creates_matching_pattern_and_audit_row(engine) -> None:  # noqa: ANN001
    with kbdb.session(engine) as s:
        did = diagnoses.store(s, _diagnosis(), {"model": "m"})
        p = feedback.confirm(s, did, events=[TEMPLATE], title="MyStore lease lost",
                             category="platform", remediation="Restart the MyStore proxy.", user="alice")
        s.commit()
        assert p.id == "mystore-lease-lost" and p.source == "confirmed" and p.created_by == "alice"
        assert p.signature == [{"template": TEMPLATE}]
        rows = feedback.feedback_for(s, diagnosis_id=did)
        assert [(f.verdict, f.user, f.pattern_id) for f in rows] == [("confirm", "alice", p.id)]
        found = load_matcher(s).match_lines(["noise", RAW])
        assert found[0].pattern_id == p.id and found[0].evidence == [RAW]
        with pytest.raises(feedback.AlreadyConfirmed, match="by alice .* mystore-lease-lost"):
            feedback.confirm(s, did, events=[TEMPLATE], title="MyStore lease lost", category="platform",
                             remediation="x", user="bob")  # one archived root cause per diagnosis
        other = diagnoses.store(s, _diagnosis(), {"model": "m"})
        p2 = feedback.confirm(s, other, events=[TEMPLATE], title="MyStore lease lost",
                              category="platform", remediation="x", user="bob")
        assert p2.id == "mystore-lease-lost-2"  # same title from another diagnosis: a unique id


@pytest.mark.parametrize("kwargs, reason", [
    ({"events": []}, "at least one"),
    ({"events": ["<*> <*>"]}, "unspecific"),
    ({"events": ["iteration <*> lm loss: <*>"]}, "too broad"),
    ({"category": "hardware/gpu"}, "category"),
    ({"title": ""}, "title"),
    ({"user": " "}, "user"),
])
def test_confirm_rejects_bad_input(sqlite_engine, kwargs: dict, reason: str) -> None:  # noqa: ANN001
    args = {"events": [TEMPLATE], "title": "T", "category": "platform", "remediation": "r", "user": "u"}
    with kbdb.session(sqlite_engine) as s:
        did = diagnoses.store(s, _diagnosis(), {})
        with pytest.raises(KbError, match=reason):
            feedback.confirm(s, did, **(args | kwargs))


def test_confirm_unknown_diagnosis(sqlite_engine) -> None:  # noqa: ANN001
    with kbdb.session(sqlite_engine) as s:
        with pytest.raises(KbError, match="no diagnosis"):
            feedback.confirm(s, 4242, events=[TEMPLATE], title="T", category="platform",
                             remediation="r", user="u")


def test_three_rejections_flag_the_pattern(engine) -> None:  # noqa: ANN001
    with kbdb.session(engine) as s:
        ids = [diagnoses.store(s, _diagnosis("cuda-out-of-memory"), {}) for _ in range(3)]
        s.commit()
        feedback.reject(s, ids[0], "u1", "not OOM")
        feedback.reject(s, ids[1], "u2")
        s.commit()
        assert not s.get(FaultPattern, "cuda-out-of-memory").flagged
        feedback.reject(s, ids[2], "u3", "again wrong")
        s.commit()
        assert s.get(FaultPattern, "cuda-out-of-memory").flagged
        assert feedback.rejection_count(s, "cuda-out-of-memory") == 3
        fb = s.exec(select(Feedback).where(Feedback.diagnosis_id == ids[0])).one()
        assert (fb.verdict, fb.user, fb.note, fb.pattern_id) == ("reject", "u1", "not OOM",
                                                                 "cuda-out-of-memory")


def test_reject_without_pattern_and_unknown_pattern(sqlite_engine) -> None:  # noqa: ANN001
    with kbdb.session(sqlite_engine) as s:
        did = diagnoses.store(s, _diagnosis(), {})
        fb = feedback.reject(s, did, "u", "engine output was useless")
        assert fb.pattern_id is None
        with pytest.raises(KbError, match="no pattern"):
            feedback.reject(s, did, "u", pattern_id="nope")


def test_confirm_match_records_the_verdict_on_the_matched_pattern(sqlite_engine) -> None:  # noqa: ANN001
    with kbdb.session(sqlite_engine) as s:
        matched = diagnoses.store(s, _diagnosis("cuda-out-of-memory"), {})
        plain = diagnoses.store(s, _diagnosis(), {})
        fb = feedback.confirm_match(s, matched, " sre1 ")
        s.commit()
        assert (fb.verdict, fb.user, fb.pattern_id) == ("confirm", "sre1", "cuda-out-of-memory")
        with pytest.raises(KbError, match="matched no pattern"):
            feedback.confirm_match(s, plain, "sre1")
        with pytest.raises(KbError, match="user"):
            feedback.confirm_match(s, matched, "")


def test_confirm_match_is_recorded_once_per_diagnosis(sqlite_engine) -> None:  # noqa: ANN001
    with kbdb.session(sqlite_engine) as s:
        did = diagnoses.store(s, _diagnosis("cuda-out-of-memory"), {})
        first = feedback.confirm_match(s, did, "sre1")
        s.commit()
        again = [feedback.confirm_match(s, did, user) for user in ("sre1", "sre2")]
        s.commit()
        assert all(fb.id == first.id and fb.user == "sre1" for fb in again)
        rows = s.exec(select(Feedback).where(Feedback.diagnosis_id == did)).all()
        assert len(rows) == 1 and feedback.match_confirmation(s, did).id == first.id


def test_one_user_alone_cannot_flag_a_pattern(engine) -> None:  # noqa: ANN001
    with kbdb.session(engine) as s:
        ids = [diagnoses.store(s, _diagnosis("cuda-out-of-memory"), {}) for _ in range(4)]
        for did in ids[:3]:
            feedback.reject(s, did, "mallory", "not it")
        s.commit()
        assert feedback.rejection_count(s, "cuda-out-of-memory") == 1
        assert not s.get(FaultPattern, "cuda-out-of-memory").flagged
        feedback.reject(s, ids[3], "u2")
        assert not s.get(FaultPattern, "cuda-out-of-memory").flagged  # two users so far
