"""Throughput from per-minute rollups agrees with counting every event, on both backends:
random histories (several types, producers and workers; creations, claims, completions,
failures, retries and expired leases), rolled up at arbitrary points in arbitrary batches,
read in every scope with whole-minute and other buckets (storage.rollups,
storage.throughput)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from queuelog.runtime import Services
from queuelog.storage import rollups as rollups_sql
from queuelog.storage import throughput as throughput_sql
from queuelog.storage.db import Database
from queuelog.storage.scope import EVERYTHING, Scope
from queuelog.storage.tables import job_events, throughput_minutes
from tests.storage.rows import at, insert, job

US = timedelta(microseconds=1)
TYPES = ("email", "pdf", "sync")
PRODUCERS = ("p1", "p2", "p3")
WORKERS = ("w1", "w2")
# (previous status, status): creation, claim, completion, failure, retry or expired
# lease, cancellation, and a pending job's change that counts as nothing.
TRANSITIONS = (
    (None, "pending"),
    ("pending", "running"),
    ("running", "completed"),
    ("running", "failed"),
    ("running", "pending"),
    ("pending", "cancelled"),
    ("pending", "pending"),
)
SCOPES = (EVERYTHING, Scope(producer="p1"), Scope(producer="p3"), Scope(worker="w1"))
# (since, until, bucket seconds): whole minutes (rollups and the edge after until's
# minute), `since` off the minute (rollups for the minutes inside a bucket, events for the
# rest), and buckets no minute fits in (every event).
RANGES = (
    (at(0), at(600), 60),
    (at(60), at(420.5), 120),
    (at(0), at(600) - US, 300),
    (at(120), at(150), 60),
    (at(30), at(600), 60),
    (at(0), at(600), 90),
    (at(180), at(181), 60),
    # `since` not on a whole minute: the rollups serve the minutes inside one bucket
    (at(30), at(570.25), 120),
    (at(12.5), at(600), 180),
    (at(45), at(465), 90),
    (at(0.000001), at(599), 300),
    (at(30), at(90), 60),
    (at(7), at(15), 1),
)


def _times(rng: random.Random) -> datetime:
    """An instant in the ten minutes from at(0), often on or just before a minute's edge."""
    minute = at(60 * rng.randrange(10))
    pick = rng.random()
    if pick < 0.2:
        return minute
    if pick < 0.3:
        return minute + timedelta(seconds=60) - US
    return minute + timedelta(microseconds=rng.randrange(60_000_000))


def _append(db: Database, job_ids: list[int], rng: random.Random, n: int) -> None:
    rows: list[dict[str, Any]] = []
    for _ in range(n):
        previous, status = rng.choice(TRANSITIONS)
        rows.append(
            {
                "job_id": rng.choice(job_ids),
                "job_type": rng.choice(TYPES),
                "producer": rng.choice(PRODUCERS),
                "worker_id": None if previous is None else rng.choice(WORKERS),
                "previous_status": previous,
                "status": status,
                "occurred_at": _times(rng),
            }
        )
    with db.writer.begin() as conn:
        conn.execute(sa.insert(job_events), rows)


def _both_ways(db: Database) -> None:
    for scope in SCOPES:
        for job_type in (None, "pdf"):
            for since, until, width in RANGES:
                asked = {"scope": scope, "since": since, "until": until}
                asked |= {"bucket_seconds": width, "job_type": job_type}
                rolled = db.read_sync(throughput_sql.buckets, **asked)
                raw = db.read_sync(throughput_sql.buckets, **asked, rollups=False)
                assert rolled == raw, asked


def test_rollups_agree_with_the_events(services: Services) -> None:
    db = services.db
    job_ids = insert(db, *(job(created_at=at(0)) for _ in range(5)))
    with db.writer.begin() as conn:
        conn.execute(sa.delete(job_events))
    rng = random.Random(12)
    _both_ways(db)  # nothing at all
    for step in range(8):
        _append(db, job_ids, rng, rng.randrange(1, 60))
        if step % 3 != 2:
            db.write_sync(rollups_sql.roll_up, rng.choice((1, 7, 40, 1000)))
        _both_ways(db)
    while db.write_sync(rollups_sql.roll_up, 1000):
        pass
    _both_ways(db)
    every = db.read_sync(throughput_sql.buckets, scope=EVERYTHING, since=at(0),
                         until=at(600), bucket_seconds=600, job_type=None)  # fmt: skip
    assert sum(every[0]) > 100  # the histories were not trivially empty


def test_rollups_outlive_pruned_events_and_the_watermark_only_grows(services: Services) -> None:
    db = services.db
    (job_id,) = insert(db, job(created_at=at(0)))
    head = db.read_sync(
        lambda tx: tx.conn.execute(sa.select(sa.func.max(job_events.c.id))).scalar()
    )
    assert db.write_sync(rollups_sql.roll_up, 1000) == head  # the job's creation
    assert db.write_sync(rollups_sql.roll_up, 1000) == 0  # nothing new
    with db.writer.begin() as conn:
        conn.execute(sa.delete(job_events))  # as retention deletes the newest events
    assert db.write_sync(rollups_sql.roll_up, 1000) == 0
    day = {"scope": EVERYTHING, "since": at(0), "until": at(3600), "job_type": None}
    kept = db.read_sync(throughput_sql.buckets, **day, bucket_seconds=60)
    assert kept == {0: (1, 0, 0, 0, 0)}
    assert db.read_sync(throughput_sql.buckets, **day, bucket_seconds=60, rollups=False) == {}
    _append(db, [job_id], random.Random(3), 5)  # new ids come after the pruned ones
    assert db.write_sync(rollups_sql.roll_up, 1000) == 5
    total = db.read_sync(lambda tx: tx.conn.execute(
        sa.select(sa.func.sum(throughput_minutes.c.enqueued + throughput_minutes.c.started
                              + throughput_minutes.c.completed + throughput_minutes.c.failed
                              + throughput_minutes.c.retried))).scalar())  # fmt: skip
    assert total >= 1


def test_pruning_rollups_deletes_only_the_minutes_before_the_cutoff(services: Services) -> None:
    db = services.db
    job_ids = insert(db, job(created_at=at(0)))
    with db.writer.begin() as conn:
        conn.execute(sa.delete(job_events))
    _append(db, job_ids, random.Random(5), 200)
    db.write_sync(rollups_sql.roll_up, 1000)
    minute = throughput_minutes.c.minute
    kept = sa.select(sa.func.count(sa.distinct(minute)), sa.func.min(minute))
    assert db.read_sync(lambda tx: tx.conn.execute(kept).one())[0] == 10
    first = db.read_sync(lambda tx: tx.conn.execute(kept).one())[1]
    assert db.write_sync(rollups_sql.prune, at(0), 3) == 0  # nothing is older
    assert db.write_sync(rollups_sql.prune, at(420) + US, 3) > 0  # three minutes at most
    assert db.read_sync(lambda tx: tx.conn.execute(kept).one()) == (7, first + 3)
    while db.write_sync(rollups_sql.prune, at(420) + US, 3):
        pass
    assert db.read_sync(lambda tx: tx.conn.execute(kept).one()) == (3, first + 7)


def test_the_rollups_serve_any_since_and_the_events_only_the_cut_minutes() -> None:
    """A day of 30-minute buckets from a `since` off the minute counts event by event only
    the 47 minutes its buckets' edges cut, and its two half minutes at the edges."""
    day = throughput_sql.plan(EVERYTHING, at(30), at(30 + 86_400), 1800)
    assert day.event_micros == 48 * 60_000_000
    assert len(day.split) == 47 and day.end - day.first == 1439
    whole = throughput_sql.plan(EVERYTHING, at(0), at(86_400), 60)
    assert whole.event_micros == 0 and not whole.split
    worker = throughput_sql.plan(Scope(worker="w1"), at(0), at(3_600), 60)
    assert worker.event_micros == 3_600_000_000  # rollups keep no worker
