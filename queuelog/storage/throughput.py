"""How many jobs were enqueued, started, completed, failed and retried in each time bucket.

Whole minutes come from `throughput_minutes` (the events rolled up by `storage.rollups`),
the rest from `job_events` (its `occurred_at` index bounds a read to the range, at a few
microseconds an event). Rollups serve a read whose `since` is on a whole minute, whose
buckets are whole minutes, and whose scope is not a worker's (rollups keep no worker): the
minutes from `since` to `until`'s minute, plus the events after the rollups' watermark
in them, plus every event from `until`'s minute to `until`. Any other read counts events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from queuelog.domain.lifecycle import COMPLETED, FAILED, PENDING, RUNNING
from queuelog.storage.scope import Scope
from queuelog.storage.tables import THROUGHPUT_COUNTS, job_events, queuelog_meta, throughput_minutes
from queuelog.storage.tx import Tx

E = job_events.c
R = throughput_minutes.c
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MINUTE_US = 60_000_000
ROLLED_THROUGH = "throughput_rolled_through"
COUNT_NAMES = THROUGHPUT_COUNTS


def epoch_micros(when: datetime) -> int:
    delta = when.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _counted(cond: sa.ColumnElement[bool]) -> sa.ColumnElement[Any]:
    return sa.func.count().filter(cond)


# Each kind of bucket count, from an event's previous and new status (in COUNT_NAMES
# order): a job's creation has no previous status; an attempt that failed and went back to
# the queue (its worker's failure or an expired lease) goes from RUNNING to PENDING.
_KIND_OF = (
    E.previous_status.is_(None),
    E.status == RUNNING,
    E.status == COMPLETED,
    E.status == FAILED,
    sa.and_(E.previous_status == RUNNING, E.status == PENDING),
)


def event_counts() -> list[sa.ColumnElement[Any]]:
    """The aggregates counting a group of events of each kind, in COUNT_NAMES order: the
    one classification, shared by the rollup and by reads of the events."""
    return [_counted(c) for c in _KIND_OF]


def rolled_through(tx: Tx) -> int:
    """The newest event id counted in `throughput_minutes` (0 before any rollup)."""
    stmt = sa.select(queuelog_meta.c.value).where(queuelog_meta.c.name == ROLLED_THROUGH)
    return int(tx.conn.execute(stmt).scalar_one_or_none() or 0)


def _served_by_rollups(scope: Scope, since: datetime, bucket_seconds: int) -> bool:
    return (
        scope.worker is None and bucket_seconds % 60 == 0 and epoch_micros(since) % MINUTE_US == 0
    )


def _from_events(
    tx: Tx,
    cond: list[sa.ColumnElement[bool]],
    since: datetime,
    bucket_seconds: int,
) -> sa.Select[Any]:
    index = tx.dialect.bucket_index(E.occurred_at, epoch_micros(since), bucket_seconds * 1_000_000)
    bucket = index.label("bucket")
    return sa.select(bucket, *event_counts()).where(*cond).group_by(bucket)


def _from_rollups(
    tx: Tx, scope: Scope, job_type: str | None, since: datetime, edge: datetime
) -> list[tuple[int, ...]]:
    """The rolled-up counts of each minute from `since` to `edge`, by the minute's index
    from `since`: grouped by the minute itself, which the primary key's order hands out
    grouped (no sort of the rows, no hash table)."""
    first, end = epoch_micros(since) // MINUTE_US, epoch_micros(edge) // MINUTE_US
    cond = [*scope.where(throughput_minutes), R.minute >= first, R.minute < end]
    if job_type is not None:
        cond.append(R.job_type == job_type)
    sums = (sa.func.sum(R[name]) for name in COUNT_NAMES)
    stmt = sa.select(R.minute, *sums).where(*cond).group_by(R.minute)
    return [(int(r[0]) - first, *r[1:]) for r in tx.conn.execute(stmt)]


def buckets(
    tx: Tx,
    *,
    scope: Scope,
    since: datetime,
    until: datetime,
    bucket_seconds: int,
    job_type: str | None,
    rollups: bool = True,
) -> dict[int, tuple[int, ...]]:
    """The counts in each bucket with an event (enqueued, started, completed, failed,
    retried), by the bucket's index from
    `since` (bucket i covers [since + i*bucket_seconds, since + (i+1)*bucket_seconds)).
    With `rollups` false, every event is read (the answer is the same)."""
    cond = [*scope.where(job_events)]
    if job_type is not None:
        cond.append(E.job_type == job_type)
    rows: list[tuple[int, ...]] = []
    if rollups and _served_by_rollups(scope, since, bucket_seconds):
        tx.dialect.snapshot(tx.conn)  # the watermark and the rows it covers, read alike
        edge = max(since, until - timedelta(microseconds=epoch_micros(until) % MINUTE_US))
        per_bucket = bucket_seconds // 60
        rows += ((m // per_bucket, *n) for m, *n in _from_rollups(tx, scope, job_type, since, edge))
        after = rolled_through(tx)
        # The tail is the few newest events, read by id: its time range is put as a minute
        # index (which no index serves), so no planner walks a day of `occurred_at` instead.
        # Counted from the minute before `since`, as 1: SQLite divides towards zero.
        minute = tx.dialect.bucket_index(E.occurred_at, epoch_micros(since) - MINUTE_US, MINUTE_US)
        minutes = (epoch_micros(edge) - epoch_micros(since)) // MINUTE_US
        tail = [*cond, E.id > after, minute >= 1, minute <= minutes]
        rows += tx.conn.execute(_from_events(tx, tail, since, bucket_seconds)).all()
        since_edge = [*cond, E.occurred_at >= edge, E.occurred_at < until]
    else:
        tx.dialect.group_by_hash(tx.conn)
        since_edge = [*cond, E.occurred_at >= since, E.occurred_at < until]
    rows += tx.conn.execute(_from_events(tx, since_edge, since, bucket_seconds)).all()
    found: dict[int, list[int]] = {}
    for bucket, *counts in rows:
        into = found.setdefault(int(bucket), [0] * len(COUNT_NAMES))
        for i, n in enumerate(counts):
            into[i] += int(n or 0)
    return {bucket: tuple(counts) for bucket, counts in found.items()}
