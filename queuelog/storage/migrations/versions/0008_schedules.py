"""schedules: recurring jobs

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from queuelog.storage.tables import BigId, UTCDateTime

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("priority", sa.SmallInteger, nullable=False),
        sa.Column("cron", sa.String(100), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("paused", sa.Boolean, nullable=False),
        sa.Column("next_run_at", UTCDateTime),
        sa.Column("last_run_at", UTCDateTime),
        sa.Column("last_job_id", BigId),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("schedules")
