"""SQLAlchemy Core tables: the schema the migrations create, and what every query names."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeEngine, UserDefinedType

from queuelog.domain.lifecycle import COMPLETED, FAILED, PENDING, RUNNING

metadata = sa.MetaData()

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# The partial indexes name the statuses they cover, from the one enum.
_PENDING = sa.text(f"status = '{PENDING}'")
_RUNNING = sa.text(f"status = '{RUNNING}'")


class UTCDateTime(sa.TypeDecorator[datetime]):
    """Aware UTC datetimes in, aware UTC datetimes out, on every dialect."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime")
        value = value.astimezone(UTC)
        # SQLite compares the stored text: keep one fixed, offset-free format.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class _JsonbText(UserDefinedType[str]):
    """PostgreSQL's jsonb, bound and read as JSON text (the cast is written into each
    statement; connections load jsonb as text: `storage.engines`)."""

    cache_ok = True
    render_bind_cast = True

    def get_col_spec(self, **_kw: Any) -> str:
        return "JSONB"


class JsonText(sa.TypeDecorator[str]):
    """A JSON object, written and read as its text: jsonb on PostgreSQL (a GIN index serves
    containment; its text comes back with keys in jsonb's order and its spacing), text on
    SQLite."""

    impl = sa.Text
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(_JsonbText())
        return dialect.type_descriptor(sa.Text())


jobs = sa.Table(
    "jobs",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("type", sa.String(64), nullable=False),
    sa.Column("payload", JsonText, nullable=False),
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
    # What the holding worker last reported through a heartbeat (JSON), and when.
    sa.Column("progress", sa.Text),
    sa.Column("progress_at", UTCDateTime),
    # Jobs of one type sharing a key obey the type's max_running_per_key (`job_types`).
    sa.Column("concurrency_key", sa.String(255)),
    sa.UniqueConstraint("producer", "idempotency_key", name="uq_jobs_producer_idempotency_key"),
    # A claim reads one range of it per type it asks for (storage.driver.claim).
    sa.Index(
        "ix_jobs_claim",
        "type",
        sa.text("priority DESC"),
        "run_at",
        "id",
        sqlite_where=_PENDING,
        postgresql_where=_PENDING,
    ),
    # A limited claim counts the running jobs of its type, and of each key (migration 0010).
    sa.Index(
        "ix_jobs_running_key",
        "type",
        "concurrency_key",
        sqlite_where=_RUNNING,
        postgresql_where=_RUNNING,
    ),
    sa.Index(
        "ix_jobs_lease",
        "lease_expires_at",
        sqlite_where=_RUNNING,
        postgresql_where=_RUNNING,
    ),
    # No other index may find pending jobs by type on PostgreSQL: with no statistics, or
    # stale ones from an empty queue, its planner costs them all alike and may read this one
    # and sort the whole backlog on every claim (migration 0004). A list by type reads its
    # pending jobs through ix_jobs_claim instead (`storage.job_lists`).
    sa.Index(
        "ix_jobs_status_type",
        "status",
        "type",
        postgresql_where=sa.text(f"status <> '{PENDING}'"),
    ),
    sa.Index("ix_jobs_producer", "producer", "id"),
    # Pending jobs have no entry in these two: every query of them compares the column.
    sa.Index(
        "ix_jobs_worker",
        "worker_id",
        "id",
        sqlite_where=sa.text("worker_id IS NOT NULL"),
        postgresql_where=sa.text("worker_id IS NOT NULL"),
    ),
    sa.Index(
        "ix_jobs_finished",
        "status",
        "finished_at",
        sqlite_where=sa.text("finished_at IS NOT NULL"),
        postgresql_where=sa.text("finished_at IS NOT NULL"),
    ),
    # The dashboard's filters: by creation time, and by idempotency key across producers.
    sa.Index("ix_jobs_created", "created_at"),
    sa.Index(
        "ix_jobs_idempotency_key",
        "idempotency_key",
        sqlite_where=sa.text("idempotency_key IS NOT NULL"),
        postgresql_where=sa.text("idempotency_key IS NOT NULL"),
    ),
    # Ids are never reused on SQLite either, even after the newest jobs are pruned.
    sqlite_autoincrement=True,
)
# payloadContains on PostgreSQL: jsonb `@>` reads this index (migration 0011). SQLite has
# no such index: it compares every payload the other conditions leave.
sa.Index(
    "ix_jobs_payload",
    jobs.c.payload,
    postgresql_using="gin",
    postgresql_ops={"payload": "jsonb_path_ops"},
).ddl_if(dialect="postgresql")

job_events = sa.Table(
    "job_events",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("job_id", BigId, sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    sa.Column("job_type", sa.String(64), nullable=False),
    sa.Column("producer", sa.String(128), nullable=False),
    sa.Column("worker_id", sa.String(128)),
    sa.Column("previous_status", sa.String(16)),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("occurred_at", UTCDateTime, nullable=False),
    sa.Index("ix_job_events_job", "job_id", "id"),
    # A producer's or a worker's replay reads only its own events, in id order, however
    # many events of others lie after its cursor (migration 0006).
    sa.Index("ix_job_events_producer", "producer", "id"),
    sa.Index(
        "ix_job_events_worker",
        "worker_id",
        "id",
        sqlite_where=sa.text("worker_id IS NOT NULL"),
        postgresql_where=sa.text("worker_id IS NOT NULL"),
    ),
    sa.Index("ix_job_events_occurred", "occurred_at"),  # throughput reads a time range
    # Never reuse an id (SQLite would after the newest rows are pruned): ids are cursors.
    sqlite_autoincrement=True,
)

# How many jobs there are of each type, producer and status, kept in the transaction of
# every change (from its events) and of every prune: `queueStats` and page totals read
# these few rows instead of counting a table of millions (`storage.counts`). Each count is
# the sum of its shards: a PostgreSQL writer adds to its connection's shard, so writers do
# not queue on one row (migration 0013).
job_counts = sa.Table(
    "job_counts",
    metadata,
    sa.Column("job_type", sa.String(64), primary_key=True),
    sa.Column("producer", sa.String(128), primary_key=True),
    sa.Column("status", sa.String(16), primary_key=True),
    sa.Column("shard", sa.SmallInteger, primary_key=True, server_default="0"),
    sa.Column("n", sa.BigInteger, nullable=False),
)

# Small facts about the database, e.g. `events_pruned_through`: the newest event id that
# retention has deleted (a subscription resuming from below it may have missed events).
queuelog_meta = sa.Table(
    "queuelog_meta",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.BigInteger, nullable=False),
)

# Throughput rolled up by minute (`storage.rollups`): each row counts the events of one
# minute (its start, in minutes since the epoch), job type and producer, up to the event id
# in `queuelog_meta` row `throughput_rolled_through`; throughput reads these, not every event.
# Its counts: jobs enqueued, started, completed, failed and retried (two named as statuses).
THROUGHPUT_COUNTS = ("enqueued", "started", COMPLETED, FAILED, "retried")
throughput_minutes = sa.Table(
    "throughput_minutes",
    metadata,
    sa.Column("minute", sa.BigInteger, primary_key=True),
    sa.Column("job_type", sa.String(64), primary_key=True),
    sa.Column("producer", sa.String(128), primary_key=True),
    *(sa.Column(name, sa.BigInteger, nullable=False) for name in THROUGHPUT_COUNTS),
)

api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(128), nullable=False, unique=True),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("allowed_types", sa.Text),
    sa.Column("max_priority", sa.SmallInteger, nullable=False),
    sa.Column("secret_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("revoked_at", UTCDateTime),
)

# Recurring jobs (`service.schedules`): `next_run_at` is the first due time not yet
# enqueued; replicas advance it by compare-and-set, and each due time's job carries an
# idempotency key, so a due time makes one job however many replicas see it.
schedules = sa.Table(
    "schedules",
    metadata,
    sa.Column("name", sa.String(100), primary_key=True),
    sa.Column("type", sa.String(64), nullable=False),
    sa.Column("payload", sa.Text, nullable=False),
    sa.Column("priority", sa.SmallInteger, nullable=False),
    sa.Column("cron", sa.String(100), nullable=False),
    sa.Column("timezone", sa.String(64), nullable=False),
    sa.Column("paused", sa.Boolean, nullable=False),
    sa.Column("next_run_at", UTCDateTime),
    sa.Column("last_run_at", UTCDateTime),
    sa.Column("last_job_id", BigId),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)

# Pause and flow limits of a job type (`storage.job_types`); a type with no row has none.
# A limited claim locks its type's row, which also holds the type's token bucket: `tokens`
# as of `tokens_at`.
job_types = sa.Table(
    "job_types",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("paused", sa.Boolean, nullable=False),
    sa.Column("max_running", sa.Integer),
    sa.Column("max_running_per_key", sa.Integer),
    sa.Column("max_starts_per_second", sa.Float),
    sa.Column("tokens", sa.Float, nullable=False),
    sa.Column("tokens_at", UTCDateTime),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)
