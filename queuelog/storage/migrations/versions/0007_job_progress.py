"""job progress: what the holding worker last reported through heartbeatJob, and when

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from queuelog.storage.tables import UTCDateTime

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("progress", sa.Text))
    op.add_column("jobs", sa.Column("progress_at", UTCDateTime))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("progress_at")
        batch.drop_column("progress")
