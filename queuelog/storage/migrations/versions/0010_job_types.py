"""job types: pause and flow limits per type, and a job's concurrency key

`job_types` holds one row per type that has ever been paused or limited (a type with no
row is unlimited): claims read it at claim time on every replica, and a limited claim
locks its row, which also carries the type's token bucket. Running jobs are counted per
type and key from the partial index on (type, concurrency_key) over RUNNING jobs, which
holds only running jobs, so its size is bounded by the limits themselves.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from queuelog.storage.tables import UTCDateTime

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

RUNNING = sa.text("status = 'running'")


def upgrade() -> None:
    op.create_table(
        "job_types",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("paused", sa.Boolean, nullable=False),
        sa.Column("max_running", sa.Integer),
        sa.Column("max_running_per_key", sa.Integer),
        sa.Column("max_starts_per_second", sa.Float),
        sa.Column("tokens", sa.Float, nullable=False),
        sa.Column("tokens_at", UTCDateTime),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )
    op.add_column("jobs", sa.Column("concurrency_key", sa.String(255)))
    op.create_index(
        "ix_jobs_running_key",
        "jobs",
        ["type", "concurrency_key"],
        sqlite_where=RUNNING,
        postgresql_where=RUNNING,
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_running_key", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("concurrency_key")
    op.drop_table("job_types")
