"""job_counts: each counter split into shards, summed when read

On PostgreSQL a writer adds its count changes to the shard of its own connection
(`pg_backend_pid() % COUNT_SHARDS`), so concurrent writers of one type and producer do
not queue on one counter row; SQLite has one writer and keeps shard 0. The existing
counters become shard 0.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

KEY = "job_type, producer, status"
COLUMNS = (
    "job_type VARCHAR(64) NOT NULL, producer VARCHAR(128) NOT NULL,"
    " status VARCHAR(16) NOT NULL, {shard}n BIGINT NOT NULL, PRIMARY KEY ({key})"
)


def _rebuild(shard: bool, select: str) -> None:
    """SQLite cannot change a primary key: a new table, filled from the old."""
    key = f"{KEY}, shard" if shard else KEY
    column = "shard SMALLINT NOT NULL DEFAULT 0, " if shard else ""
    op.execute(f"CREATE TABLE job_counts_new ({COLUMNS.format(shard=column, key=key)})")
    op.execute(f"INSERT INTO job_counts_new ({KEY}, n) {select}")
    op.execute("DROP TABLE job_counts")
    op.execute("ALTER TABLE job_counts_new RENAME TO job_counts")


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild(True, f"SELECT {KEY}, n FROM job_counts")
        return
    op.add_column(
        "job_counts", sa.Column("shard", sa.SmallInteger, nullable=False, server_default="0")
    )
    op.execute("ALTER TABLE job_counts DROP CONSTRAINT job_counts_pkey")
    op.execute(f"ALTER TABLE job_counts ADD CONSTRAINT job_counts_pkey PRIMARY KEY ({KEY}, shard)")


def downgrade() -> None:
    merged = f"SELECT {KEY}, sum(n) FROM job_counts GROUP BY {KEY}"
    if op.get_bind().dialect.name == "sqlite":
        _rebuild(False, merged)
        return
    op.execute(
        f"CREATE TEMPORARY TABLE job_counts_merged AS {merged.replace('sum(n)', 'sum(n) AS n')}"
    )
    op.execute("DELETE FROM job_counts")
    op.execute("ALTER TABLE job_counts DROP CONSTRAINT job_counts_pkey")
    op.drop_column("job_counts", "shard")
    op.execute(f"ALTER TABLE job_counts ADD CONSTRAINT job_counts_pkey PRIMARY KEY ({KEY})")
    op.execute(f"INSERT INTO job_counts ({KEY}, n) SELECT {KEY}, n FROM job_counts_merged")
    op.execute("DROP TABLE job_counts_merged")
