"""A read holds to its request's deadline (`storage.deadline`): a statement still running
then is stopped by the backend itself (PostgreSQL's statement_timeout, SQLite's progress
handler), nothing of it is left running, and the connection serves the next read."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from queuelog.storage import deadline
from queuelog.storage.db import Database
from queuelog.storage.deadline import DeadlinePassed
from queuelog.storage.tx import Tx

# A statement that runs far longer than any test waits: a minute on each backend.
SLOW = {
    "postgresql": "SELECT pg_sleep(60)",
    "sqlite": (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000000000)"
        " SELECT count(*) FROM n"
    ),
}
# Well under the minute: a statement that was not stopped fails the test, it does not hang.
GENEROUS = 20.0


def _slow(tx: Tx) -> object:
    return tx.conn.exec_driver_sql(SLOW[tx.dialect.name]).scalar()


def _running_sleeps(tx: Tx) -> int:
    """Other sessions' statements still sleeping (PostgreSQL)."""
    stmt = sa.text(
        "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
        " AND state = 'active' AND query LIKE 'SELECT pg_sleep(60)%'"
    )
    return int(tx.conn.execute(stmt).scalar_one())


def _stopped(db: Database) -> None:
    if db.dialect != "postgresql":
        return
    # pg_stat_activity lags the session's end of its statement by a little: wait for it.
    end = time.monotonic() + GENEROUS
    while db.read_sync(_running_sleeps) and time.monotonic() < end:
        time.sleep(0.05)
    assert db.read_sync(_running_sleeps) == 0


def _one(tx: Tx) -> int:
    return int(tx.conn.exec_driver_sql("SELECT 1").scalar_one())


def test_a_slow_statement_is_stopped_at_the_deadline(db: Database) -> None:
    started = time.monotonic()
    with deadline.within(0.5), pytest.raises(DeadlinePassed):
        db.read_sync(_slow)
    assert time.monotonic() - started < GENEROUS
    _stopped(db)
    # Every pooled connection serves reads again, the deadline gone with its read.
    for _ in range(10):
        assert db.read_sync(_one) == 1


async def test_an_async_read_keeps_its_callers_deadline(db: Database) -> None:
    started = time.monotonic()
    with deadline.within(0.5), pytest.raises(DeadlinePassed):
        await db.read(_slow)
    assert time.monotonic() - started < GENEROUS
    _stopped(db)
    assert await db.read(_one) == 1


def test_a_read_with_no_time_left_does_not_start(db: Database) -> None:
    with deadline.within(0.0), pytest.raises(DeadlinePassed):
        db.read_sync(_one)


def test_reads_outside_a_deadline_are_not_limited(db: Database) -> None:
    def counted(tx: Tx) -> int:
        # Long enough to pass many of SQLite's progress checks.
        text = (
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)"
            " SELECT count(*) FROM n"
        )
        return int(tx.conn.exec_driver_sql(text).scalar_one())

    with deadline.within(30.0):
        assert db.read_sync(counted) == 200_000
    assert db.read_sync(counted) == 200_000
