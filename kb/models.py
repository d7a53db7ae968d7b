"""SQLModel tables of the knowledge base.

Timestamps are timezone-aware UTC datetimes (sqlmodel stores them as UTC on SQLite and
PostgreSQL alike and returns them aware). Any change here needs an Alembic revision in ``kb/migrations``.
"""
from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Column, Index, Text, UniqueConstraint, false, text
from sqlmodel import Field, SQLModel

PATTERN_KINDS = ("root", "cascade")
SEVERITIES = ("critical", "high", "medium", "low")
PATTERN_SOURCES = ("builtin", "confirmed")
VERDICTS = ("confirm", "reject")


def utcnow() -> datetime:
    """Current time as an aware UTC datetime."""
    return datetime.now(UTC)


class KbMeta(SQLModel, table=True):
    """Key/value facts about the database itself, e.g. ``library:<file>`` -> loaded version."""

    __tablename__ = "kb_meta"
    key: str = Field(primary_key=True, max_length=200)
    value: str = Field(sa_column=Column(Text, nullable=False))


class FaultPattern(SQLModel, table=True):
    __tablename__ = "fault_pattern"
    id: str = Field(primary_key=True, max_length=120)  # stable slug
    title: str = Field(max_length=300)
    category: str = Field(max_length=64)  # one of engine.model.CATEGORIES
    description: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    remediation: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    # list of {"regex": str} and/or {"template": str} (Drain template, "<*>" = variable part)
    signature: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    kind: str = Field(default="root", max_length=16)  # root | cascade
    severity: str = Field(default="medium", max_length=16)  # critical | high | medium | low
    source: str = Field(default="confirmed", max_length=16)  # builtin | confirmed
    created_by: str = Field(default="", max_length=200)
    created_at: datetime = Field(default_factory=utcnow)
    enabled: bool = Field(default=True)
    version: int = Field(default=1)
    # rejected by SREs FLAG_AFTER_REJECTIONS times or more: needs review
    flagged: bool = Field(default=False, sa_column_kwargs={"server_default": false()})


class JobFamily(SQLModel, table=True):
    """Jobs with the same job.json ``settings``; key = sha256 of their canonical JSON."""

    __tablename__ = "job_family"
    key: str = Field(primary_key=True, max_length=64)
    settings: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class LearnedJob(SQLModel, table=True):
    """A succeeded job whose templates went into its family's normal pool (idempotence)."""

    __tablename__ = "learned_job"
    __table_args__ = (UniqueConstraint("family_key", "job_id", name="uq_learned_job_family_job"),)
    id: int | None = Field(default=None, primary_key=True)
    family_key: str = Field(foreign_key="job_family.key", max_length=64)
    job_id: str = Field(max_length=300)
    learned_at: datetime = Field(default_factory=utcnow)


class NormalEvent(SQLModel, table=True):
    """One template of a family's normal pool."""

    __tablename__ = "normal_event"
    __table_args__ = (
        UniqueConstraint("family_key", "template_hash", name="uq_normal_event_family_template"),
    )
    id: int | None = Field(default=None, primary_key=True)
    family_key: str = Field(foreign_key="job_family.key", max_length=64)
    template_hash: str = Field(max_length=64)  # sha256 of template (long texts can't be unique keys)
    template: str = Field(sa_column=Column(Text, nullable=False))
    jobs_seen: int = Field(default=0)  # succeeded jobs it was seen in
    total_count: int = Field(default=0)  # occurrences over those jobs


class DiagnosisRecord(SQLModel, table=True):
    __tablename__ = "diagnosis"
    __table_args__ = (Index("ix_diagnosis_job_id", "job_id"),)
    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(max_length=300)
    family_key: str | None = Field(default=None, foreign_key="job_family.key", max_length=64)
    status: str = Field(max_length=16)  # matched | analyzed
    json_text: str = Field(sa_column=Column(Text, nullable=False))  # l4.diagnosis/v1 JSON
    matched_pattern_id: str | None = Field(default=None, foreign_key="fault_pattern.id", max_length=120)
    created_at: datetime = Field(default_factory=utcnow)
    requested_at: datetime | None = None
    diagnosed_at: datetime | None = None
    slack_channel: str | None = Field(default=None, max_length=64)
    slack_thread_ts: str | None = Field(default=None, max_length=64)


class Feedback(SQLModel, table=True):
    """An SRE's verdict on a diagnosis (confirm: a pattern was created from it; reject)."""

    __tablename__ = "feedback"
    id: int | None = Field(default=None, primary_key=True)
    diagnosis_id: int = Field(foreign_key="diagnosis.id", index=True)
    pattern_id: str | None = Field(default=None, foreign_key="fault_pattern.id", max_length=120,
                                      index=True)
    verdict: str = Field(max_length=16)  # confirm | reject
    user: str = Field(max_length=200)
    note: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    created_at: datetime = Field(default_factory=utcnow)


class NodeIncident(SQLModel, table=True):
    """A node that a diagnosis found suspicious (score >= 0.5), for per-node history."""

    __tablename__ = "node_incident"
    __table_args__ = (Index("ix_node_incident_node_time", "node", "time"),)
    id: int | None = Field(default=None, primary_key=True)
    node: str = Field(max_length=300)
    job_id: str = Field(max_length=300)
    pattern_id: str | None = Field(default=None, foreign_key="fault_pattern.id", max_length=120)
    diagnosis_id: int = Field(foreign_key="diagnosis.id", index=True)
    score: float = Field(default=0.0)
    time: datetime = Field(default_factory=utcnow)


REQUEST_STATES = ("queued", "running", "done", "failed", "abandoned")
ACTIVE_REQUEST_STATES = ("queued", "running")
ACTIVE_REQUEST_WHERE = text("state IN ('queued', 'running')")


class BotRequest(SQLModel, table=True):
    """A diagnosis the Slack bot accepted: written before Slack is acknowledged, taken by a worker,
    resumed after a restart. ``state``: queued | running | done | failed | abandoned (done, failed
    and abandoned are final: the thread got its last message)."""

    __tablename__ = "bot_request"
    __table_args__ = (
        Index("ix_bot_request_state", "state"),
        # one active request per job across every bot on the database (kb.requests.add)
        Index("ix_bot_request_active_job", "job_key", unique=True, sqlite_where=ACTIVE_REQUEST_WHERE,
              postgresql_where=ACTIVE_REQUEST_WHERE),
    )
    id: int | None = Field(default=None, primary_key=True)
    job_ref: str = Field(sa_column=Column(Text, nullable=False))  # the job ID or report link as asked
    job_key: str | None = Field(default=None, max_length=64)  # sha256 of the ref (kb.requests.job_key)
    channel: str = Field(max_length=64)
    thread_ts: str = Field(max_length=64)
    requester: str | None = Field(default=None, max_length=64)  # Slack user ID
    state: str = Field(default="queued", max_length=16)
    attempts: int = Field(default=0)  # analyses started
    message_ts: str | None = Field(default=None, max_length=64)  # the progress message in the thread
    diagnosis_id: int | None = Field(default=None, foreign_key="diagnosis.id")
    final_text: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # why it failed
    holder: str | None = Field(default=None, max_length=200)  # host:pid:token of the running worker
    lease_until: datetime | None = None  # the holder renews it while it works
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None


class SlackDelivery(SQLModel, table=True):
    """A Slack event (``event:<event_id>``) or interaction already handled, kept until ``expires_at``
    so that Slack's redeliveries start nothing new, across restarts too."""

    __tablename__ = "slack_delivery"
    __table_args__ = (Index("ix_slack_delivery_expires_at", "expires_at"),)
    key: str = Field(primary_key=True, max_length=200)
    seen_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime = Field(default_factory=utcnow)


class Lease(SQLModel, table=True):
    """A named lease held by one bot process (``host:pid:token``) until ``expires_at``: e.g.
    ``digest:<channel>:<run time>`` so that one scheduled digest run is posted by one bot (kb.leases)."""

    __tablename__ = "lease"
    __table_args__ = (Index("ix_lease_expires_at", "expires_at"),)
    name: str = Field(primary_key=True, max_length=200)
    holder: str = Field(max_length=200)
    acquired_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime = Field(default_factory=utcnow)
