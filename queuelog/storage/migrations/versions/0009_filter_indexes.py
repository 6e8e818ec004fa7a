"""indexes for the dashboard: jobs by creation time and by idempotency key, events by time

A filter by creation time, or by an idempotency key across producers (the unique
constraint leads with the producer), reads one range of an index instead of the table;
jobs with no key have no entry in the second. Neither can serve a claim, which compares
neither column. Throughput counts the events of a time range.

An index of the same name that is there already (an operator built it CONCURRENTLY
beforehand, see docs/deployment.md) is kept: each CREATE INDEX says IF NOT EXISTS.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

HAS_KEY = sa.text("idempotency_key IS NOT NULL")


def upgrade() -> None:
    op.create_index("ix_jobs_created", "jobs", ["created_at"], if_not_exists=True)
    op.create_index(
        "ix_jobs_idempotency_key",
        "jobs",
        ["idempotency_key"],
        sqlite_where=HAS_KEY,
        postgresql_where=HAS_KEY,
        if_not_exists=True,
    )
    op.create_index("ix_job_events_occurred", "job_events", ["occurred_at"], if_not_exists=True)


def downgrade() -> None:
    op.drop_index("ix_job_events_occurred", table_name="job_events")
    op.drop_index("ix_jobs_idempotency_key", table_name="jobs")
    op.drop_index("ix_jobs_created", table_name="jobs")
