"""job_counts: how many jobs of each type, producer and status

`queueStats` and page totals counted the jobs table: 60-350 ms at 1M jobs. The counters are
kept in the transaction of every change from then on (`storage.counts`); this migration
fills them from the jobs there are, in its own transaction (on PostgreSQL under the
migration lock every replica takes at start-up). Replicas still running the previous
version would change jobs without counting: upgrade them all before serving writes, or run
`queuelog recount` once they are.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_counts",
        sa.Column("job_type", sa.String(64), primary_key=True),
        sa.Column("producer", sa.String(128), primary_key=True),
        sa.Column("status", sa.String(16), primary_key=True),
        sa.Column("n", sa.BigInteger, nullable=False),
    )
    op.execute(
        "INSERT INTO job_counts (job_type, producer, status, n)"
        " SELECT type, producer, status, count(*) FROM jobs GROUP BY type, producer, status"
    )


def downgrade() -> None:
    op.drop_table("job_counts")
