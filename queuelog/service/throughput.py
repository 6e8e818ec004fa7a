"""Throughput: what happened to the jobs an actor may see, bucket by bucket, from the job
history. The range is bounded so that one request reads and answers a bounded amount: at
most BUCKETS_MAX buckets, and at most EVENT_MINUTES_MAX minutes of it counted event by event
(the rest from the per-minute rollups, `storage.throughput.plan`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from queuelog.service import errors
from queuelog.service.models import Actor
from queuelog.service.visibility import scope
from queuelog.storage import rollups as rollups_sql
from queuelog.storage import throughput as throughput_sql
from queuelog.storage.db import Database

BUCKET_SECONDS_MAX = 86_400
BUCKETS_MAX = 1_440
# The most of the job history one read may count event by event (the rest comes from the
# per-minute rollups): its edges and the minutes its buckets' edges cut.
EVENT_MINUTES_MAX = 120
ROLLUP_BATCH = 50_000  # event ids a rollup run covers at most: a short hold of the writer


@dataclass(frozen=True, slots=True)
class Bucket:
    start: datetime
    enqueued: int = 0
    started: int = 0
    completed: int = 0
    failed: int = 0
    retried: int = 0


def aware(when: datetime) -> datetime:
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when


def _bucket_count(since: datetime, until: datetime, bucket_seconds: int) -> int:
    if not 1 <= bucket_seconds <= BUCKET_SECONDS_MAX:
        raise errors.ValidationFailed(
            f"bucketSeconds must be between 1 and {BUCKET_SECONDS_MAX}", ["bucketSeconds"]
        )
    if until <= since:
        raise errors.ValidationFailed("until must be later than since", ["until"])
    width = timedelta(seconds=bucket_seconds)
    count = -((since - until) // width)  # ceiling: a last, partial bucket counts
    if count > BUCKETS_MAX:
        raise errors.ValidationFailed(
            f"since to until spans {count} buckets of {bucket_seconds} s; the limit is"
            f" {BUCKETS_MAX}: ask for a shorter range or wider buckets",
            ["since"],
        )
    return count


def _check_event_span(plan: throughput_sql.Plan) -> None:
    minutes = -(-plan.event_micros // 60_000_000)
    if minutes > EVENT_MINUTES_MAX:
        raise errors.ValidationFailed(
            f"this read would count {minutes} minutes of the job history event by event;"
            f" the limit is {EVENT_MINUTES_MAX}: ask for a shorter range, or put since on"
            " a whole minute with bucketSeconds a multiple of 60 (read from per-minute"
            " counts; a worker's key is always counted event by event)",
            ["since"],
        )


async def throughput(
    db: Database,
    actor: Actor,
    *,
    since: datetime,
    until: datetime,
    bucket_seconds: int,
    job_type: str | None,
) -> list[Bucket]:
    """Every bucket from `since` to `until`, oldest first, empty ones included (a time
    without an offset is read as UTC)."""
    since, until = aware(since), aware(until)
    count = _bucket_count(since, until, bucket_seconds)
    within = scope(actor)
    _check_event_span(throughput_sql.plan(within, since, until, bucket_seconds))
    if job_type is not None and not job_type.isprintable():
        found = {}
    else:
        found = await db.read(
            throughput_sql.buckets,
            scope=within,
            since=since,
            until=until,
            bucket_seconds=bucket_seconds,
            job_type=job_type,
        )
    width = timedelta(seconds=bucket_seconds)
    return [Bucket(since + i * width, *found.get(i, ())) for i in range(count)]


async def roll_up(db: Database, batch: int = ROLLUP_BATCH) -> int:
    """Roll the next events up into per-minute counts (at most `batch` ids); how far the
    watermark moved (0 when it is at the head)."""
    return await db.write(rollups_sql.roll_up, batch)


async def prune_rollups(db: Database, before: datetime, minutes: int = 60) -> int:
    """Delete the per-minute counts of minutes before `before`, `minutes` minutes' worth a
    transaction; how many rows."""
    total = 0
    while n := await db.write(rollups_sql.prune, before, minutes):
        total += n
    return total
