"""event cursors: never reused on SQLite; the pruned-through watermark

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        # Without AUTOINCREMENT SQLite hands out max(id) + 1, so pruning the newest events
        # would let new events reuse cursors that subscribers already hold.
        with op.batch_alter_table(
            "job_events", recreate="always", table_kwargs={"sqlite_autoincrement": True}
        ):
            pass
    meta = op.create_table(
        "queuelog_meta",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(meta, [{"name": "events_pruned_through", "value": 0}])


def downgrade() -> None:
    op.drop_table("queuelog_meta")
