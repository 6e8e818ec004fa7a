"""secondary indexes no claim can read, and that pending jobs skip

Without statistics (a new table), or with stale ones taken while the queue was empty,
PostgreSQL estimates one pending job, and then every index that can find `status =
'pending' AND type = ?` costs what ix_jobs_claim costs: it picked (status, type) and sorted
the whole backlog on every claim (23 ms a claim at 50k pending). On PostgreSQL
ix_jobs_status_type now leaves pending jobs out (the claim index holds them), so only
ix_jobs_claim can serve a claim. ix_jobs_finished and ix_jobs_worker leave out the rows
whose column is NULL (every query of them compares that column, which implies it is not
NULL): a new job no longer writes an entry into either.

Rebuilt with plain CREATE INDEX in the migration's transaction, as 0003 explains.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

NOT_PENDING = sa.text("status <> 'pending'")
FINISHED = sa.text("finished_at IS NOT NULL")
HELD = sa.text("worker_id IS NOT NULL")


def upgrade() -> None:
    for name in ("ix_jobs_status_type", "ix_jobs_worker", "ix_jobs_finished"):
        op.drop_index(name, table_name="jobs")
    op.create_index("ix_jobs_status_type", "jobs", ["status", "type"], postgresql_where=NOT_PENDING)
    op.create_index(
        "ix_jobs_worker", "jobs", ["worker_id", "id"], sqlite_where=HELD, postgresql_where=HELD
    )
    op.create_index(
        "ix_jobs_finished",
        "jobs",
        ["status", "finished_at"],
        sqlite_where=FINISHED,
        postgresql_where=FINISHED,
    )


def downgrade() -> None:
    for name in ("ix_jobs_status_type", "ix_jobs_worker", "ix_jobs_finished"):
        op.drop_index(name, table_name="jobs")
    op.create_index("ix_jobs_status_type", "jobs", ["status", "type"])
    op.create_index("ix_jobs_worker", "jobs", ["worker_id", "id"])
    op.create_index("ix_jobs_finished", "jobs", ["status", "finished_at"])
