"""How many jobs were enqueued, started, completed, failed and retried in each time bucket:
one grouped read of `job_events` (its `occurred_at` index bounds it to the range), which
costs a few microseconds an event in the range."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from queuelog.lifecycle import COMPLETED, FAILED, PENDING, RUNNING
from queuelog.storage.scope import Scope
from queuelog.storage.tables import job_events
from queuelog.storage.tx import Tx

E = job_events.c
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_micros(when: datetime) -> int:
    delta = when.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _counted(cond: sa.ColumnElement[bool]) -> sa.ColumnElement[Any]:
    return sa.func.count().filter(cond)


# Each kind of bucket count, from an event's previous and new status: a job's creation has
# no previous status; an attempt that failed and went back to the queue (its worker's
# failure or an expired lease) goes from RUNNING to PENDING.
_KIND_OF = (
    E.previous_status.is_(None),
    E.status == RUNNING,
    E.status == COMPLETED,
    E.status == FAILED,
    sa.and_(E.previous_status == RUNNING, E.status == PENDING),
)


def buckets(
    tx: Tx,
    *,
    scope: Scope,
    since: datetime,
    until: datetime,
    bucket_seconds: int,
    job_type: str | None,
) -> dict[int, tuple[int, ...]]:
    """The counts in each bucket with an event (enqueued, started, completed, failed,
    retried), by the bucket's index from
    `since` (bucket i covers [since + i*bucket_seconds, since + (i+1)*bucket_seconds))."""
    index = tx.dialect.bucket_index(E.occurred_at, epoch_micros(since), bucket_seconds * 1_000_000)
    cond = [*scope.where(job_events), E.occurred_at >= since, E.occurred_at < until]
    if job_type is not None:
        cond.append(E.job_type == job_type)
    bucket = index.label("bucket")
    stmt = sa.select(bucket, *(_counted(c) for c in _KIND_OF)).where(*cond).group_by(bucket)
    tx.dialect.group_by_hash(tx.conn)
    return {int(r[0]): tuple(int(n or 0) for n in r[1:]) for r in tx.conn.execute(stmt).all()}
