"""the claim index leads with the job type

A claim reads one range of ix_jobs_claim per type it asks for, so a worker for one type no
longer walks past every pending job of the other types that sorts ahead of its own.

The index is rebuilt with a plain CREATE INDEX, in the migration's transaction: queuelog
migrates inside one transaction that holds an advisory lock (`storage.migrate`), where
PostgreSQL refuses CREATE INDEX CONCURRENTLY (and Alembic's autocommit_block needs a
transaction of its own to commit). The build reads the whole table once and blocks writes
to `jobs` meanwhile; it indexes pending jobs only.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

PENDING_ONLY = sa.text("status = 'pending'")


def upgrade() -> None:
    op.drop_index("ix_jobs_claim", table_name="jobs")
    op.create_index(
        "ix_jobs_claim",
        "jobs",
        ["type", sa.text("priority DESC"), "run_at", "id"],
        sqlite_where=PENDING_ONLY,
        postgresql_where=PENDING_ONLY,
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_claim", table_name="jobs")
    op.create_index(
        "ix_jobs_claim",
        "jobs",
        [sa.text("priority DESC"), "run_at", "id"],
        sqlite_where=PENDING_ONLY,
        postgresql_where=PENDING_ONLY,
    )
