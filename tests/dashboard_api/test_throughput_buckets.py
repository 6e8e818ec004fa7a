"""Which bucket an event falls in, on both backends: an instant on a bucket's edge starts
that bucket, a microsecond before it ends the one before (storage.throughput.buckets, with
the dialects' bucket arithmetic)."""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa

from queuelog.runtime import Services
from queuelog.storage import throughput as throughput_sql
from queuelog.storage.db import Database
from queuelog.storage.scope import EVERYTHING
from queuelog.storage.tables import job_events
from tests.storage.rows import at, insert, job

US = timedelta(microseconds=1)


def _events_at(db: Database, times: list[datetime]) -> None:
    """Replace every event with one `pending` event of one job at each of `times`."""
    (job_id,) = insert(db, job(created_at=at(0)))
    with db.writer.begin() as conn:
        conn.execute(sa.delete(job_events))
        for when in times:
            conn.execute(
                sa.insert(job_events).values(
                    job_id=job_id,
                    job_type="email",
                    producer="p1",
                    previous_status=None,
                    status="pending",
                    occurred_at=when,
                )
            )


def _per_minute(db: Database, since: datetime, until: datetime) -> dict[int, int]:
    """Events per minute from `since`, by the minute's index."""
    found = db.read_sync(
        throughput_sql.buckets,
        scope=EVERYTHING,
        since=since,
        until=until,
        bucket_seconds=60,
        job_type=None,
    )
    return {i: n[0] for i, n in found.items()}


def test_an_instant_on_a_bucket_edge_starts_that_bucket(services: Services) -> None:
    since = at(0) + timedelta(microseconds=123_457)
    times = [since, since + timedelta(seconds=60) - US, since + timedelta(seconds=60)]
    times += [since + timedelta(hours=23, minutes=59), since + timedelta(days=1) - US]
    _events_at(services.db, times)
    until = since + timedelta(days=1)
    assert _per_minute(services.db, since, until) == {0: 2, 1: 1, 1439: 2}


def test_a_microsecond_before_a_whole_minute_stays_in_its_minute(services: Services) -> None:
    _events_at(services.db, [at(60) - US, at(60) - 400 * US, at(60)])
    assert _per_minute(services.db, at(0), at(120)) == {0: 2, 1: 1}
