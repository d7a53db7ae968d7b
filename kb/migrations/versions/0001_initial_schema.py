"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _ts(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "fault_pattern",
        sa.Column("id", sa.String(length=120), nullable=False),
        sa.Column("title", sa.String(length=300), nullable=False),
        sa.Column("category", sa.String(length=64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("remediation", sa.Text(), nullable=False),
        sa.Column("signature", sa.JSON(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("severity", sa.String(length=16), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        _ts("created_at"),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "job_family",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        _ts("created_at"),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_table(
        "kb_meta",
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_table(
        "diagnosis",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.String(length=300), nullable=False),
        sa.Column("family_key", sa.String(length=64), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("json_text", sa.Text(), nullable=False),
        sa.Column("matched_pattern_id", sa.String(length=120), nullable=True),
        _ts("created_at"),
        _ts("requested_at", nullable=True),
        _ts("diagnosed_at", nullable=True),
        sa.Column("slack_channel", sa.String(length=64), nullable=True),
        sa.Column("slack_thread_ts", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(["family_key"], ["job_family.key"]),
        sa.ForeignKeyConstraint(["matched_pattern_id"], ["fault_pattern.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "learned_job",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("family_key", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.String(length=300), nullable=False),
        _ts("learned_at"),
        sa.ForeignKeyConstraint(["family_key"], ["job_family.key"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("family_key", "job_id", name="uq_learned_job_family_job"),
    )
    op.create_table(
        "normal_event",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("family_key", sa.String(length=64), nullable=False),
        sa.Column("template_hash", sa.String(length=64), nullable=False),
        sa.Column("template", sa.Text(), nullable=False),
        sa.Column("jobs_seen", sa.Integer(), nullable=False),
        sa.Column("total_count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["family_key"], ["job_family.key"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("family_key", "template_hash", name="uq_normal_event_family_template"),
    )
    op.create_table(
        "feedback",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("diagnosis_id", sa.Integer(), nullable=False),
        sa.Column("pattern_id", sa.String(length=120), nullable=True),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("user", sa.String(length=200), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        _ts("created_at"),
        sa.ForeignKeyConstraint(["diagnosis_id"], ["diagnosis.id"]),
        sa.ForeignKeyConstraint(["pattern_id"], ["fault_pattern.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("feedback") as batch_op:
        batch_op.create_index("ix_feedback_diagnosis_id", ["diagnosis_id"], unique=False)
        batch_op.create_index("ix_feedback_pattern_id", ["pattern_id"], unique=False)
    op.create_table(
        "node_incident",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("node", sa.String(length=300), nullable=False),
        sa.Column("job_id", sa.String(length=300), nullable=False),
        sa.Column("pattern_id", sa.String(length=120), nullable=True),
        sa.Column("diagnosis_id", sa.Integer(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        _ts("time"),
        sa.ForeignKeyConstraint(["diagnosis_id"], ["diagnosis.id"]),
        sa.ForeignKeyConstraint(["pattern_id"], ["fault_pattern.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("node_incident") as batch_op:
        batch_op.create_index("ix_node_incident_diagnosis_id", ["diagnosis_id"], unique=False)


def downgrade() -> None:
    op.drop_table("node_incident")
    op.drop_table("feedback")
    op.drop_table("normal_event")
    op.drop_table("learned_job")
    op.drop_table("diagnosis")
    op.drop_table("kb_meta")
    op.drop_table("job_family")
    op.drop_table("fault_pattern")
