"""How many jobs were enqueued, started, completed, failed and retried in each time bucket.

Whole minutes come from `throughput_minutes` (the events rolled up by `storage.rollups`),
the rest from `job_events` (its `occurred_at` index bounds a read to the range, at a few
microseconds an event). Rollups serve, whatever `since`, each whole minute that lies inside
one bucket, unless the scope is a worker's (rollups keep no worker) or buckets are shorter
than a minute: those minutes' counts, plus the events after the rollups' watermark in them.
The rest (the partial minutes at the range's edges, the minutes a bucket's edge cuts, or
all of the range) is counted event by event (`plan`)."""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class Plan:
    """How one read is served: the rollups count the whole minutes from `first` to `end`
    (minutes since the epoch) except the `split` ones, which a bucket's edge cuts; the
    events count the time `ranges` (microseconds since the epoch, [start, end)): the edges
    of the range that are not whole minutes, the split minutes, or all of it."""

    first: int = 0
    end: int = 0
    split: frozenset[int] = frozenset()
    ranges: tuple[tuple[int, int], ...] = ()

    @property
    def event_micros(self) -> int:
        """How much of the job history the read counts event by event."""
        return sum(b - a for a, b in self.ranges)


def plan(
    scope: Scope, since: datetime, until: datetime, bucket_seconds: int, rollups: bool = True
) -> Plan:
    """The rollups serve every whole minute that lies inside one bucket, for any `since`,
    unless the scope is a worker's (rollups keep no worker) or buckets are shorter than a
    minute; the events the rest."""
    s, u, width = epoch_micros(since), epoch_micros(until), bucket_seconds * 1_000_000
    first, end = -(-s // MINUTE_US), u // MINUTE_US
    if not rollups or scope.worker is not None or bucket_seconds < 60 or first >= end:
        return Plan(ranges=((s, u),))
    split = {
        edge // MINUTE_US
        for edge in range(s + width, u, width)  # the edges between buckets
        if edge % MINUTE_US and first <= edge // MINUTE_US < end
    }
    pieces = [
        (s, first * MINUTE_US),
        *((m * MINUTE_US, (m + 1) * MINUTE_US) for m in sorted(split)),
    ]
    pieces.append((end * MINUTE_US, u))
    ranges: list[tuple[int, int]] = []
    for a, b in pieces:
        if a >= b:
            continue
        if ranges and ranges[-1][1] == a:
            ranges[-1] = (ranges[-1][0], b)
        else:
            ranges.append((a, b))
    return Plan(first, end, frozenset(split), tuple(ranges))


def _instant(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


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
    tx: Tx, scope: Scope, job_type: str | None, first: int, end: int
) -> list[tuple[int, ...]]:
    """The rolled-up counts of each minute from `first` to `end`, by the minute: grouped by
    the minute itself, which the primary key's order hands out grouped (no sort of the
    rows, no hash table)."""
    cond = [*scope.where(throughput_minutes), R.minute >= first, R.minute < end]
    if job_type is not None:
        cond.append(R.job_type == job_type)
    sums = (sa.func.sum(R[name]) for name in COUNT_NAMES)
    stmt = sa.select(R.minute, *sums).where(*cond).group_by(R.minute)
    return [(int(r[0]), *r[1:]) for r in tx.conn.execute(stmt)]


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
    s, width = epoch_micros(since), bucket_seconds * 1_000_000
    p = plan(scope, since, until, bucket_seconds, rollups)
    rows: list[tuple[int, ...]] = []
    if p.end > p.first:
        tx.dialect.snapshot(tx.conn)  # the watermark and the rows it covers, read alike
        minutes = _from_rollups(tx, scope, job_type, p.first, p.end)
        after = rolled_through(tx)
        # The tail is the few newest events, read by id: its time range is put as a minute
        # index (which no index serves), so no planner walks a day of `occurred_at` instead.
        # Counted from the minute before `first`, as 1: SQLite divides towards zero.
        origin = (p.first - 1) * MINUTE_US
        minute = tx.dialect.bucket_index(E.occurred_at, origin, MINUTE_US).label("minute")
        tail = [*cond, E.id > after, minute >= 1, minute <= p.end - p.first]
        stmt = sa.select(minute, *event_counts()).where(*tail).group_by(minute)
        minutes += ((p.first - 1 + int(m), *n) for m, *n in tx.conn.execute(stmt))
        rows += (((m * MINUTE_US - s) // width, *n) for m, *n in minutes if m not in p.split)
    else:
        tx.dialect.group_by_hash(tx.conn)
    if p.ranges:
        spans = (
            sa.and_(E.occurred_at >= _instant(a), E.occurred_at < _instant(b)) for a, b in p.ranges
        )
        rows += tx.conn.execute(_from_events(tx, [*cond, sa.or_(*spans)], since, bucket_seconds))
    found: dict[int, list[int]] = {}
    for bucket, *counts in rows:
        into = found.setdefault(int(bucket), [0] * len(COUNT_NAMES))
        for i, n in enumerate(counts):
            into[i] += int(n or 0)
    return {bucket: tuple(counts) for bucket, counts in found.items()}
