"""pattern review flag; indexes for per-node history and per-job lookups

Adds ``fault_pattern.flagged`` (set when SREs reject a pattern three times or more) and the
indexes behind "incidents of this node, newest first" and "diagnoses of this job".

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("fault_pattern") as batch_op:
        batch_op.add_column(sa.Column("flagged", sa.Boolean(), nullable=False, server_default=sa.false()))
    with op.batch_alter_table("diagnosis") as batch_op:
        batch_op.create_index("ix_diagnosis_job_id", ["job_id"], unique=False)
    with op.batch_alter_table("node_incident") as batch_op:
        batch_op.create_index("ix_node_incident_node_time", ["node", "time"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("node_incident") as batch_op:
        batch_op.drop_index("ix_node_incident_node_time")
    with op.batch_alter_table("diagnosis") as batch_op:
        batch_op.drop_index("ix_diagnosis_job_id")
    with op.batch_alter_table("fault_pattern") as batch_op:
        batch_op.drop_column("flagged")
