"""throughput rolled up by minute, type and producer, with its watermark

The table starts empty with its watermark at 0: the maintenance loop rolls the existing
events up in bounded batches, and until it has, throughput reads the rest from the events.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

COUNTS = ("enqueued", "started", "completed", "failed", "retried")


def upgrade() -> None:
    op.create_table(
        "throughput_minutes",
        sa.Column("minute", sa.BigInteger, primary_key=True),
        sa.Column("job_type", sa.String(64), primary_key=True),
        sa.Column("producer", sa.String(128), primary_key=True),
        *(sa.Column(name, sa.BigInteger, nullable=False) for name in COUNTS),
    )
    meta = sa.table("queuelog_meta", sa.column("name", sa.String), sa.column("value"))
    op.bulk_insert(meta, [{"name": "throughput_rolled_through", "value": 0}])


def downgrade() -> None:
    op.execute("DELETE FROM queuelog_meta WHERE name = 'throughput_rolled_through'")
    op.drop_table("throughput_minutes")
