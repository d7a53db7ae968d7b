"""Stored diagnoses and the node incidents they imply."""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlmodel import Session, select

from engine.model import Diagnosis
from kb import KbError
from kb.models import DiagnosisRecord, FaultPattern, Feedback, NodeIncident, utcnow
from kb.pools import ensure_family

SUSPICIOUS_NODE_SCORE = 0.5


def store(session: Session, diagnosis: Diagnosis, settings: dict[str, Any] | None = None, *,
          requested_at: datetime | None = None, diagnosed_at: datetime | None = None,
          slack_channel: str | None = None, slack_thread_ts: str | None = None) -> int:
    """Store a diagnosis (its l4.diagnosis/v1 JSON) and one node incident per suspicious node
    (score >= 0.5). Returns the diagnosis id. Caller commits."""
    fam = ensure_family(session, settings)
    matched = diagnosis.matches[0].pattern_id if diagnosis.matches else None
    if matched is not None and session.get(FaultPattern, matched) is None:
        matched = None  # a pattern that is not (or no longer) in this knowledge base
    now = utcnow()
    rec = DiagnosisRecord(
        job_id=diagnosis.job_id, family_key=fam.key, status=diagnosis.status,
        json_text=json.dumps(diagnosis.to_dict(detail=True), ensure_ascii=False), matched_pattern_id=matched,
        created_at=now, requested_at=requested_at, diagnosed_at=diagnosed_at or now,
        slack_channel=slack_channel, slack_thread_ts=slack_thread_ts)
    session.add(rec)
    session.flush()
    assert rec.id is not None
    for n in diagnosis.nodes:
        if n.score >= SUSPICIOUS_NODE_SCORE:
            session.add(NodeIncident(node=n.node, job_id=diagnosis.job_id, pattern_id=matched,
                                     diagnosis_id=rec.id, score=float(n.score), time=rec.diagnosed_at))
    session.flush()
    return rec.id


def get(session: Session, diagnosis_id: int) -> DiagnosisRecord:
    rec = session.get(DiagnosisRecord, diagnosis_id)
    if rec is None:
        raise KbError(f"no diagnosis with id {diagnosis_id}")
    return rec


def as_dict(rec: DiagnosisRecord) -> dict[str, Any]:
    """The stored l4.diagnosis/v1 JSON of a diagnosis."""
    return json.loads(rec.json_text)


def recent(session: Session, *, job: str | None = None, limit: int = 20) -> list[DiagnosisRecord]:
    """Stored diagnoses, newest first; only those of job ``job`` when given."""
    stmt = select(DiagnosisRecord)
    if job is not None:
        stmt = stmt.where(DiagnosisRecord.job_id == job)
    stmt = stmt.order_by(DiagnosisRecord.created_at.desc(), DiagnosisRecord.id.desc()).limit(limit)
    return list(session.exec(stmt))


def summary(session: Session, rec: DiagnosisRecord) -> dict[str, Any]:
    """What an SRE looks a diagnosis up for: job, time, status, matched pattern, where it points
    (top node, stage), and the verdicts on it (who confirmed or rejected it, when)."""
    doc = as_dict(rec)
    nodes = doc.get("nodes") or []
    verdicts = session.exec(select(Feedback).where(Feedback.diagnosis_id == rec.id)
                            .order_by(Feedback.created_at, Feedback.id)).all()
    return {
        "diagnosis_id": rec.id, "job_id": rec.job_id,
        "time": f"{rec.diagnosed_at or rec.created_at:%Y-%m-%d %H:%M:%S}",  # UTC
        "status": rec.status, "matched_pattern": rec.matched_pattern_id,
        "stage": doc.get("stage"), "top_node": nodes[0].get("node") if nodes else None,
        "events": len(doc.get("events") or []),
        "confirmed_by": [f.user for f in verdicts if f.verdict == "confirm"],
        "rejected_by": [f.user for f in verdicts if f.verdict == "reject"],
        "feedback": [{"verdict": f.verdict, "user": f.user, "pattern_id": f.pattern_id,
                      "time": f"{f.created_at:%Y-%m-%d %H:%M:%S}", "note": f.note} for f in verdicts],
        "slack_thread": f"{rec.slack_channel}/{rec.slack_thread_ts}" if rec.slack_thread_ts else None,
    }


def attach_slack(session: Session, diagnosis_id: int, channel: str, thread_ts: str) -> None:
    """Remember where the diagnosis was posted. Caller commits."""
    rec = get(session, diagnosis_id)
    rec.slack_channel, rec.slack_thread_ts = channel, thread_ts
    session.add(rec)
    session.flush()


def node_history(session: Session, node: str, *, limit: int = 50) -> list[NodeIncident]:
    """Incidents of ``node``, newest first."""
    stmt = (select(NodeIncident).where(NodeIncident.node == node)
            .order_by(NodeIncident.time.desc(), NodeIncident.id.desc()).limit(limit))
    return list(session.exec(stmt))
