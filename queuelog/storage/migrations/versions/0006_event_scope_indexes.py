"""job_events: an index for each scope a producer's or a worker's replay reads

A subscription that resumes from an old cursor reads the events after it that its key may
see: a producer's own, or a worker's. Without an index on those columns the read walked
every later event of every producer to find a few (or none), so one key could make the
database read the whole feed as often as it liked. (producer, id) and (worker_id, id)
give that read one range in id order; the worker's leaves out events with no worker, as
ix_jobs_worker does.

Built with plain CREATE INDEX in the migration's transaction, as 0003 explains.

An index of the same name that is there already (an operator built it CONCURRENTLY
beforehand, see docs/deployment.md) is kept: each CREATE INDEX says IF NOT EXISTS.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

HELD = sa.text("worker_id IS NOT NULL")


def upgrade() -> None:
    op.create_index("ix_job_events_producer", "job_events", ["producer", "id"], if_not_exists=True)
    op.create_index(
        "ix_job_events_worker",
        "job_events",
        ["worker_id", "id"],
        sqlite_where=HELD,
        postgresql_where=HELD,
        if_not_exists=True,
    )


def downgrade() -> None:
    op.drop_index("ix_job_events_worker", table_name="job_events")
    op.drop_index("ix_job_events_producer", table_name="job_events")
