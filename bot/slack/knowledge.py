"""The knowledge-base calls the bot makes: read a stored diagnosis, confirm, reject, list patterns.

Every function opens its own short session on the bot's engine; errors of bad input are
``kb.KbError`` (one line, safe to show).
"""
from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import select

from bot.slack.modals import ConfirmForm
from kb import KbError, diagnoses, feedback
from kb import db as kbdb
from kb.digest import Digest, compute_digest
from kb.models import DiagnosisRecord, FaultPattern


@dataclass(frozen=True)
class StoredDiagnosis:
    id: int
    data: dict[str, Any]  # the l4.diagnosis/v1 JSON
    matched_pattern_id: str | None
    channel: str | None
    thread_ts: str | None


@dataclass(frozen=True)
class Rejection:
    pattern_id: str | None
    flagged: bool  # the pattern is now flagged for review
    repeated: bool  # this user had already said so; nothing recorded


class Knowledge:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._confirming = threading.Lock()

    def diagnosis(self, diagnosis_id: int) -> StoredDiagnosis:
        with kbdb.session(self.engine) as s:
            rec = diagnoses.get(s, diagnosis_id)
            return StoredDiagnosis(diagnosis_id, diagnoses.as_dict(rec), rec.matched_pattern_id,
                                   rec.slack_channel, rec.slack_thread_ts)

    def attach_thread(self, diagnosis_id: int, channel: str, thread_ts: str) -> None:
        with kbdb.session(self.engine) as s:
            diagnoses.attach_slack(s, diagnosis_id, channel, thread_ts)
            s.commit()

    def confirm(self, form: ConfirmForm, user: str) -> FaultPattern:
        """Archive the chosen events as a new confirmed pattern, recording who and when."""
        with kbdb.session(self.engine) as s:
            pattern = feedback.confirm(s, form.diagnosis_id, events=form.events, title=form.title,
                                       category=form.category, remediation=form.remediation, user=user)
            s.commit()
            return pattern

    def confirmation(self, diagnosis_id: int) -> tuple[str, str] | None:
        """(pattern id, who) when a pattern was already archived from this diagnosis."""
        with kbdb.session(self.engine) as s:
            fb = feedback.confirmation(s, diagnosis_id)
            return (str(fb.pattern_id), fb.user) if fb is not None and fb.pattern_id else None

    def confirm_match(self, diagnosis_id: int, user: str) -> tuple[FaultPattern, str | None]:
        """Record that the matched pattern was the root cause, once per diagnosis: (that pattern,
        None), or (that pattern, who confirmed it first) when it already was (nothing recorded)."""
        with self._confirming, kbdb.session(self.engine) as s:  # concurrent clicks: one row
            earlier = feedback.match_confirmation(s, diagnosis_id)
            fb = earlier or feedback.confirm_match(s, diagnosis_id, user)
            s.commit()
            pattern = s.get(FaultPattern, fb.pattern_id)
            if pattern is None:
                raise KbError(f"pattern {fb.pattern_id} is gone")
            return pattern, (earlier.user if earlier is not None else None)

    def reject(self, diagnosis_id: int, user: str) -> Rejection:
        """Record "not the cause" once per user and diagnosis; flags the matched pattern after
        repeated rejections (kb.feedback)."""
        with kbdb.session(self.engine) as s:
            earlier = feedback.feedback_for(s, diagnosis_id=diagnosis_id)
            rec = diagnoses.get(s, diagnosis_id)
            if any(f.verdict == "reject" and f.user == user for f in earlier):
                return Rejection(rec.matched_pattern_id, False, True)
            fb = feedback.reject(s, diagnosis_id, user)
            s.commit()
            pattern = s.get(FaultPattern, fb.pattern_id) if fb.pattern_id else None
            return Rejection(fb.pattern_id, bool(pattern and pattern.flagged), False)

    def patterns_overview(self, recent: int = 10) -> tuple[Counter[str], list[FaultPattern]]:
        """Enabled patterns per category, and the most recently confirmed ones (newest first)."""
        with kbdb.session(self.engine) as s:
            rows = list(s.exec(select(FaultPattern).where(FaultPattern.enabled == True)))  # noqa: E712
        per_category = Counter(p.category for p in rows)
        confirmed = sorted((p for p in rows if p.source == "confirmed"), key=lambda p: p.created_at,
                           reverse=True)[:recent]
        return per_category, confirmed

    def digest(self, days: int) -> Digest:
        """The recurring-fault digest of the last ``days`` days (kb.digest)."""
        with kbdb.session(self.engine) as s:
            return compute_digest(s, days=days)

    def diagnosed_in_thread(self, channel: str, thread_ts: str, job_id: str) -> bool:
        """Whether a diagnosis of ``job_id`` was already posted in that thread."""
        with kbdb.session(self.engine) as s:
            stmt = select(DiagnosisRecord.id).where(DiagnosisRecord.slack_channel == channel,
                                                    DiagnosisRecord.slack_thread_ts == thread_ts,
                                                    DiagnosisRecord.job_id == job_id).limit(1)
            return s.exec(stmt).first() is not None
