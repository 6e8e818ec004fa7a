"""A transaction the database ends for a deadlock (40P01) or a serialization failure
(40001) runs again (`storage.retry`): the caller never sees the error, and the work of the
failed tries took no effect. When every try fails, the caller gets `Contended`."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
import sqlalchemy as sa

from queuelog.storage import jobs as jobs_sql
from queuelog.storage import retry
from queuelog.storage.db import Database
from queuelog.storage.tx import Tx
from tests.storage.rows import insert, job, table_counts


def _deadlock() -> Exception:
    return psycopg.errors.DeadlockDetected("deadlock detected")


def _as_sqlalchemy_raises(exc: Exception) -> Exception:
    """`exc` as a Core statement raises it."""
    return sa.exc.OperationalError("SELECT 1", {}, exc)


@pytest.mark.parametrize(
    "error",
    [
        _deadlock,
        lambda: _as_sqlalchemy_raises(_deadlock()),
        lambda: psycopg.errors.SerializationFailure("could not serialize access"),
    ],
)
def test_a_write_ended_for_a_conflict_runs_again(db: Database, error: object) -> None:
    tries: list[int] = []

    def enqueue(tx: Tx) -> int:
        (row,) = jobs_sql.insert(tx, [job()])
        tries.append(row.id)
        if len(tries) < 3:
            raise error()  # type: ignore[operator]
        return int(row.id)

    job_id = db.write_sync(enqueue)
    assert len(tries) == 3
    assert job_id == tries[-1]
    assert table_counts(db) == (1, 1)  # the failed tries' job and event are gone


async def test_a_conflict_in_a_group_commit_costs_the_others_nothing(db: Database) -> None:
    """Writes that share the transaction run again with it, each once in the end."""
    tries: list[str] = []

    def first(tx: Tx) -> str:
        tries.append("first")
        jobs_sql.insert(tx, [job(type="pdf")])
        return "first"

    def conflicted(tx: Tx) -> str:
        tries.append("conflicted")
        if tries.count("conflicted") == 1:
            raise _deadlock()
        return "conflicted"

    got = await asyncio.gather(db.write(first), db.write(conflicted), db.write(first))
    assert list(got) == ["first", "conflicted", "first"]
    assert table_counts(db) == (2, 2)


def test_a_write_that_always_conflicts_ends_in_contended(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[None] = []

    def hopeless(tx: Tx) -> None:
        jobs_sql.insert(tx, [job()])
        calls.append(None)
        raise _deadlock()

    with pytest.raises(retry.Contended) as ended:
        db.write_sync(hopeless)
    assert len(calls) == retry.TRIES
    assert ended.value.sqlstate == "40P01"
    assert "try again" in str(ended.value)
    assert table_counts(db) == (0, 0)


def test_a_read_ended_for_a_conflict_runs_again(db: Database) -> None:
    insert(db, job())
    tries: list[None] = []

    def count(tx: Tx) -> int:
        tries.append(None)
        if len(tries) == 1:
            raise psycopg.errors.SerializationFailure("could not serialize access")
        return table_counts_in(tx)

    assert db.read_sync(count) == 1
    assert len(tries) == 2


def table_counts_in(tx: Tx) -> int:
    return int(tx.conn.execute(sa.text("SELECT count(*) FROM jobs")).scalar_one())


def test_other_errors_are_not_run_again(db: Database) -> None:
    tries: list[None] = []

    def broken(tx: Tx) -> None:
        tries.append(None)
        raise psycopg.errors.UniqueViolation("duplicate key")

    with pytest.raises(psycopg.errors.UniqueViolation):
        db.write_sync(broken)
    assert len(tries) == 1


def test_retrying_waits_a_little_more_each_time() -> None:
    waits: list[float] = []

    def conflict() -> None:
        raise _deadlock()

    with pytest.raises(retry.Contended):
        retry.retrying(conflict, sleep=waits.append)
    assert len(waits) == retry.TRIES - 1
    ceilings = [retry.BACKOFF_FIRST * 2**i for i in range(len(waits))]
    assert all(0 <= w <= c for w, c in zip(waits, ceilings, strict=True))
