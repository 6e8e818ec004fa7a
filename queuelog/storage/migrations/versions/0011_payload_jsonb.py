"""payloads as jsonb on PostgreSQL, with a GIN index serving payloadContains

On PostgreSQL `jobs.payload` becomes jsonb (each stored payload parsed once, the table
rewritten under an exclusive lock: a large table takes a while) with a `jsonb_path_ops`
GIN index, which `payload @> …` reads instead of the whole table. SQLite keeps the text:
its containment is a function comparing the payloads the other conditions leave.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

# jsonb cannot hold NUL: a stored payload with the escape \u0000 (not preceded by an odd
# number of backslashes, which would make it text) gets U+FFFD in its place; new payloads
# with NUL are refused (`service.validation.json_object`).
TO_JSONB = (
    r"CASE WHEN strpos(payload, '\u0000') = 0 THEN payload::jsonb"
    r" ELSE regexp_replace(payload, '(?<!\\)((?:\\\\)*)\\u0000', '\1\\ufffd', 'g')::jsonb END"
)

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.alter_column("jobs", "payload", type_=postgresql.JSONB(), postgresql_using=TO_JSONB)
    op.create_index(
        "ix_jobs_payload",
        "jobs",
        ["payload"],
        postgresql_using="gin",
        postgresql_ops={"payload": "jsonb_path_ops"},
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.drop_index("ix_jobs_payload", table_name="jobs")
    op.alter_column("jobs", "payload", type_=sa.Text(), postgresql_using="payload::text")
