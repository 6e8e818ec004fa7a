"""jobs, job_events and api_keys

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from queuelog.storage.tables import BigId, UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

PENDING_ONLY = sa.text("status = 'pending'")
RUNNING_ONLY = sa.text("status = 'running'")


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("priority", sa.SmallInteger, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("retry_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("max_retries", sa.Integer, nullable=False),
        sa.Column("idempotency_key", sa.String(255)),
        sa.Column("request_hash", sa.String(64)),
        sa.Column("producer", sa.String(128), nullable=False),
        sa.Column("run_at", UTCDateTime, nullable=False),
        sa.Column("claimed_at", UTCDateTime),
        sa.Column("worker_id", sa.String(128)),
        sa.Column("lease_expires_at", UTCDateTime),
        sa.Column("error", sa.Text),
        sa.Column("result", sa.Text),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("finished_at", UTCDateTime),
        sa.UniqueConstraint("producer", "idempotency_key", name="uq_jobs_producer_idempotency_key"),
        # AUTOINCREMENT: SQLite would otherwise hand out max(id) + 1, so pruning the newest
        # jobs would let a new job take the id of one a client still remembers.
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_jobs_claim",
        "jobs",
        [sa.text("priority DESC"), "run_at", "id"],
        sqlite_where=PENDING_ONLY,
        postgresql_where=PENDING_ONLY,
    )
    op.create_index(
        "ix_jobs_lease",
        "jobs",
        ["lease_expires_at"],
        sqlite_where=RUNNING_ONLY,
        postgresql_where=RUNNING_ONLY,
    )
    op.create_index("ix_jobs_status_type", "jobs", ["status", "type"])
    op.create_index("ix_jobs_producer", "jobs", ["producer", "id"])
    op.create_index("ix_jobs_worker", "jobs", ["worker_id", "id"])
    op.create_index("ix_jobs_finished", "jobs", ["status", "finished_at"])

    op.create_table(
        "job_events",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("job_id", BigId, sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("job_type", sa.String(64), nullable=False),
        sa.Column("producer", sa.String(128), nullable=False),
        sa.Column("worker_id", sa.String(128)),
        sa.Column("previous_status", sa.String(16)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("occurred_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_job_events_job", "job_events", ["job_id", "id"])

    op.create_table(
        "api_keys",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(128), nullable=False, unique=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("allowed_types", sa.Text),
        sa.Column("max_priority", sa.SmallInteger, nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("revoked_at", UTCDateTime),
    )


def downgrade() -> None:
    op.drop_table("api_keys")
    op.drop_table("job_events")
    op.drop_table("jobs")
