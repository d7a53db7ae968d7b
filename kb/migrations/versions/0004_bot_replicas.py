"""several bots on one database: one active request per job, named leases

Adds ``bot_request.job_key`` (the sha256 of the job reference) with a unique index over the queued
and running rows, so that a job is analysed once across every bot on the database, and ``lease``
(a named lease with its holder and expiry, e.g. one scheduled digest run posted by one bot).
Active rows already there get their key; when two active rows name the same job (possible only
with several bots before this revision) the older one keeps it.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""
from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

ACTIVE = sa.text("state IN ('queued', 'running')")


def _key(ref: str) -> str:
    return hashlib.sha256(ref.strip().rstrip("/").encode("utf-8", "surrogatepass")).hexdigest()


def upgrade() -> None:
    op.add_column("bot_request", sa.Column("job_key", sa.String(length=64), nullable=True))
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT id, job_ref FROM bot_request WHERE state IN ('queued', 'running') "
                                "ORDER BY id")).fetchall()
    seen: set[str] = set()
    for row_id, ref in rows:
        key = _key(ref)
        if key in seen:
            continue
        seen.add(key)
        conn.execute(sa.text("UPDATE bot_request SET job_key = :k WHERE id = :i"), {"k": key, "i": row_id})
    op.create_index("ix_bot_request_active_job", "bot_request", ["job_key"], unique=True,
                    sqlite_where=ACTIVE, postgresql_where=ACTIVE)
    op.create_table(
        "lease",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("holder", sa.String(length=200), nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_index("ix_lease_expires_at", "lease", ["expires_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_lease_expires_at", table_name="lease")
    op.drop_table("lease")
    op.drop_index("ix_bot_request_active_job", table_name="bot_request")
    with op.batch_alter_table("bot_request") as batch:
        batch.drop_column("job_key")
