"""SRE feedback on diagnoses: confirm (creates a fault pattern) and reject (flags bad patterns)."""
from __future__ import annotations

from sqlalchemy import func
from sqlmodel import Session, select

from kb import KbError
from kb.diagnoses import get as get_diagnosis
from kb.models import FaultPattern, Feedback, utcnow
from kb.patterns_io import slugify, validate_pattern_dict

FLAG_AFTER_REJECTIONS = 3


class AlreadyConfirmed(KbError):
    """The diagnosis' root cause was already archived as a pattern (one pattern per diagnosis)."""


def confirmation(session: Session, diagnosis_id: int) -> Feedback | None:
    """The confirmation that archived a pattern from this diagnosis, if there is one."""
    stmt = (select(Feedback).where(Feedback.diagnosis_id == diagnosis_id, Feedback.verdict == "confirm",
                                   Feedback.pattern_id.is_not(None))  # type: ignore[union-attr]
            .order_by(Feedback.created_at, Feedback.id))
    return session.exec(stmt).first()


def _unique_pattern_id(session: Session, title: str) -> str:
    base = slugify(title)
    pid, n = base, 2
    while session.get(FaultPattern, pid) is not None:
        pid, n = f"{base}-{n}", n + 1
    return pid


def confirm(session: Session, diagnosis_id: int, *, events: list[str], title: str, category: str,
            remediation: str, user: str, kind: str = "root", severity: str = "high",
            description: str = "", note: str = "") -> FaultPattern:
    """Turn the chosen event templates of a diagnosis into a confirmed fault pattern.

    Each template becomes an RE2 signature entry (escaped, whitespace-tolerant, "<*>" = a
    bounded gap); the signature is validated (not empty, not too broad). Records the
    confirmation in the feedback table. Caller commits.
    """
    rec = get_diagnosis(session, diagnosis_id)
    if not user or not user.strip():
        raise KbError("a confirmation needs the confirming user")
    earlier = confirmation(session, diagnosis_id)
    if earlier is not None and earlier.pattern_id != rec.matched_pattern_id:
        raise AlreadyConfirmed(f"already confirmed by {earlier.user} on {earlier.created_at:%Y-%m-%d} "
                               f"as pattern {earlier.pattern_id}")
    templates = [e for e in (events or []) if e and e.strip()]
    if not templates:
        raise KbError("choose at least one event template as the signature")
    data = validate_pattern_dict({
        "id": _unique_pattern_id(session, title or ""),
        "title": title, "category": category, "kind": kind, "severity": severity,
        "description": description, "remediation": remediation,
        "signature": [{"template": t} for t in dict.fromkeys(templates)],
    })
    pattern = FaultPattern(**data, source="confirmed", created_by=user.strip(), created_at=utcnow())
    session.add(pattern)
    session.flush()
    session.add(Feedback(diagnosis_id=diagnosis_id, pattern_id=pattern.id, verdict="confirm",
                         user=user.strip(), note=note or "", created_at=utcnow()))
    session.flush()
    return pattern


def reject(session: Session, diagnosis_id: int, user: str, note: str = "",
           pattern_id: str | None = None) -> Feedback:
    """Record that a diagnosis was wrong. The pattern concerned (``pattern_id``, default: the
    pattern the diagnosis matched) is flagged once 3 different users have rejected it (one user
    rejecting it on several diagnoses counts once). Caller commits."""
    rec = get_diagnosis(session, diagnosis_id)
    if not user or not user.strip():
        raise KbError("a rejection needs the rejecting user")
    pattern_id = pattern_id or rec.matched_pattern_id
    pattern = None
    if pattern_id is not None:
        pattern = session.get(FaultPattern, pattern_id)
        if pattern is None:
            raise KbError(f"no pattern with id {pattern_id}")
    fb = Feedback(diagnosis_id=diagnosis_id, pattern_id=pattern_id, verdict="reject",
                  user=user.strip(), note=note or "", created_at=utcnow())
    session.add(fb)
    session.flush()
    if pattern is not None and not pattern.flagged:
        if rejection_count(session, pattern.id) >= FLAG_AFTER_REJECTIONS:
            pattern.flagged = True
            session.add(pattern)
            session.flush()
    return fb


def rejection_count(session: Session, pattern_id: str) -> int:
    """How many different users rejected diagnoses naming `pattern_id`."""
    stmt = select(func.count(func.distinct(Feedback.user))).where(Feedback.pattern_id == pattern_id,
                                                                  Feedback.verdict == "reject")
    return int(session.exec(stmt).one())


def feedback_for(session: Session, *, diagnosis_id: int | None = None,
                 pattern_id: str | None = None) -> list[Feedback]:
    stmt = select(Feedback).order_by(Feedback.created_at, Feedback.id)
    if diagnosis_id is not None:
        stmt = stmt.where(Feedback.diagnosis_id == diagnosis_id)
    if pattern_id is not None:
        stmt = stmt.where(Feedback.pattern_id == pattern_id)
    return list(session.exec(stmt))


def confirm_match(session: Session, diagnosis_id: int, user: str, note: str = "") -> Feedback:
    """Record that the pattern a diagnosis matched is indeed its root cause, once per diagnosis:
    when it was already confirmed, that earlier verdict is returned and nothing is added (see
    `match_confirmation`). Caller commits."""
    rec = get_diagnosis(session, diagnosis_id)
    if not user or not user.strip():
        raise KbError("a confirmation needs the confirming user")
    if rec.matched_pattern_id is None:
        raise KbError(f"diagnosis {diagnosis_id} matched no pattern; confirm it with chosen events")
    earlier = match_confirmation(session, diagnosis_id)
    if earlier is not None:
        return earlier
    fb = Feedback(diagnosis_id=diagnosis_id, pattern_id=rec.matched_pattern_id, verdict="confirm",
                  user=user.strip(), note=note or "", created_at=utcnow())
    session.add(fb)
    session.flush()
    return fb


def match_confirmation(session: Session, diagnosis_id: int) -> Feedback | None:
    """The first confirmation of the pattern a diagnosis matched, if there is one."""
    rec = get_diagnosis(session, diagnosis_id)
    if rec.matched_pattern_id is None:
        return None
    stmt = (select(Feedback).where(Feedback.diagnosis_id == diagnosis_id, Feedback.verdict == "confirm",
                                   Feedback.pattern_id == rec.matched_pattern_id)
            .order_by(Feedback.created_at, Feedback.id))
    return session.exec(stmt).first()
