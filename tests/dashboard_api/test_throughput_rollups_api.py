"""throughput through a live server, on both backends, once its maintenance loop has rolled
the events up: a read from a whole minute comes from the per-minute rollups (it still
counts what happened after the job history is gone), within the caller's visibility, and
the minutes after the rollups' watermark come from the events."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from queuelog.storage import throughput as throughput_sql
from queuelog.storage.db import Database
from queuelog.storage.tables import job_events
from tests.api.attack import COMPLETE, FAIL, claim, enqueued
from tests.dashboard_api.test_throughput import KINDS, _buckets, _totals
from tests.support import ADMIN_SECRET, LiveServer


@pytest.fixture
def db(server: LiveServer) -> Iterator[Database]:
    found = Database(server.db_url)
    try:
        yield found
    finally:
        found.close()


def _rolled_up(db: Database, job_type: str) -> None:
    """Wait until the server's rollups cover every event of `job_type`."""
    newest = sa.select(sa.func.max(job_events.c.id)).where(job_events.c.job_type == job_type)
    wanted = db.read_sync(lambda tx: tx.conn.execute(newest).scalar_one())
    deadline = time.monotonic() + 30
    while db.read_sync(throughput_sql.rolled_through) < wanted:
        assert time.monotonic() < deadline, "the maintenance loop rolled nothing up"
        time.sleep(0.1)


def test_rolled_up_counts_outlive_the_events(
    server: LiveServer, db: Database, job_type: str
) -> None:
    minute = datetime.now(UTC).replace(second=0, microsecond=0)
    producer = server.create_key("PRODUCER", [job_type])
    worker = server.create_key("WORKER", [job_type])
    a, b, c = (enqueued(server, producer, type=job_type, maxRetries=3)["id"] for _ in range(3))
    assert claim(server, worker, [job_type])["job"]["id"] == a
    server.gql(COMPLETE, {"id": a}, worker)
    assert claim(server, worker, [job_type])["job"]["id"] == b
    server.gql(FAIL, {"id": b, "error": "again", "retryable": True}, worker)
    assert claim(server, worker, [job_type])["job"]["id"] == c
    server.gql(FAIL, {"id": c, "error": "no", "retryable": False}, worker)
    expected = {"enqueued": 3, "started": 3, "completed": 1, "failed": 1, "retried": 1}
    nothing = dict.fromkeys(KINDS, 0)
    since = minute - timedelta(minutes=2)
    until = minute + timedelta(minutes=3)  # whole minutes: rollups and the events after them
    asked = {"since": since, "until": until, "type": job_type}

    def totals(key: str, **changed: object) -> dict[str, int]:
        return _totals(_buckets(server, key, **{**asked, **changed}))

    assert totals(ADMIN_SECRET) == expected  # rolled up or not yet, the same
    _rolled_up(db, job_type)
    for width in (60, 120, 300):
        assert totals(ADMIN_SECRET, b=width) == expected
    assert totals(ADMIN_SECRET, until=None) == expected  # until now: its minute from events
    with db.writer.begin() as conn:  # the history gone, as retention deletes it
        conn.execute(sa.delete(job_events).where(job_events.c.job_type == job_type))
    assert totals(ADMIN_SECRET) == expected
    assert totals(producer) == expected
    assert totals(server.create_key("PRODUCER", [job_type])) == nothing
    assert totals(server.create_key("VIEWER")) == expected
    # What rollups cannot serve is counted from the events, now gone: a worker's scope
    # (rollups keep no worker), buckets shorter than a minute. (A since within a minute,
    # or 90-s buckets, take the minutes inside one bucket from the rollups too.)
    assert totals(worker) == nothing
    assert totals(ADMIN_SECRET, b=30) == nothing
