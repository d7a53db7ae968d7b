"""durable bot requests; Slack deliveries already handled

Adds ``bot_request`` (each diagnosis the Slack bot accepted, its state and progress message, so a
restart resumes what was cut off) and ``slack_delivery`` (event and interaction IDs already handled,
with an expiry, so Slack's redeliveries start nothing new).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _ts(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "bot_request",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_ref", sa.Text(), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=False),
        sa.Column("thread_ts", sa.String(length=64), nullable=False),
        sa.Column("requester", sa.String(length=64), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("message_ts", sa.String(length=64), nullable=True),
        sa.Column("diagnosis_id", sa.Integer(), nullable=True),
        sa.Column("final_text", sa.Text(), nullable=True),
        sa.Column("holder", sa.String(length=200), nullable=True),
        _ts("lease_until", nullable=True),
        _ts("created_at"),
        _ts("updated_at"),
        _ts("started_at", nullable=True),
        _ts("finished_at", nullable=True),
        sa.ForeignKeyConstraint(["diagnosis_id"], ["diagnosis.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_bot_request_state", "bot_request", ["state"], unique=False)
    op.create_table(
        "slack_delivery",
        sa.Column("key", sa.String(length=200), nullable=False),
        _ts("seen_at"),
        _ts("expires_at"),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index("ix_slack_delivery_expires_at", "slack_delivery", ["expires_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_slack_delivery_expires_at", table_name="slack_delivery")
    op.drop_table("slack_delivery")
    op.drop_index("ix_bot_request_state", table_name="bot_request")
    op.drop_table("bot_request")
