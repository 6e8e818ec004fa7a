"""PostgreSQL's writers: event ids become visible in id order however many writers and
processes commit at once, and writers and readers whose connections were cut carry on."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, TypeVar

import psycopg
import pytest

from queuelog.storage import db as db_module
from queuelog.storage import engines
from queuelog.storage import events as events_sql
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database
from queuelog.storage.dialect import COLUMNS
from queuelog.storage.tx import Tx
from tests.storage.plans import plans_kept
from tests.storage.rows import job, table_counts

T = TypeVar("T")


@pytest.fixture
def pg_db(backend: str, db: Database) -> Database:
    if backend != "postgresql":
        pytest.skip("PostgreSQL's writers")
    return db


def _libpq(db: Database) -> str:
    return db.url.set(drivername="postgresql").render_as_string(hide_password=False)


def test_no_event_at_or_below_the_feed_s_horizon_becomes_visible_later(pg_db: Database) -> None:
    """The feed tails events by id up to its horizon: an id at or below a horizon once read
    must never become visible after it. Two databases (two processes' worth of writer
    threads) write at once, with no common lock, while a reader reads the horizon, then
    the ids, and checks that no id appears at or below the horizon it read before."""
    other = Database(str(pg_db.url))
    done = threading.Event()
    late: list[int] = []

    def watch() -> None:
        seen: set[int] = set()
        horizon = 0
        while not done.is_set():
            with pg_db.reader.connect() as conn:
                now = pg_db.sql.event_horizon(conn)
                ids = {r[0] for r in conn.exec_driver_sql("SELECT id FROM job_events")}
                conn.rollback()
            assert now is not None
            late.extend(i for i in ids - seen if i <= horizon)
            seen, horizon = ids, now

    def write(db: Database) -> None:
        for _ in range(150):
            db.write_sync(jobs_sql.insert, [job()])

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        writers = [threading.Thread(target=write, args=(d,)) for d in (pg_db, other) * 2]
        for w in writers:
            w.start()
        for w in writers:
            w.join()
    finally:
        done.set()
        watcher.join()
        other.close()
    assert late == []
    assert table_counts(pg_db) == (600, 600)


def _insert_job(tx: Tx, values: dict[str, Any]) -> list[Any]:
    """A job inserted on the driver's cursor, as the hot statements are, without its event
    (nor the event-order lock)."""
    cur = tx.driver_cursor()
    marks = ", ".join(["%s"] * len(values))
    cur.execute(
        f"INSERT INTO jobs ({', '.join(values)}) VALUES ({marks}) RETURNING {COLUMNS}",
        list(values.values()),
    )
    return [tx.dialect.row(tx, cur.fetchone())]


def _on_every_writer(db: Database, fn: Callable[[Tx], T]) -> list[T]:
    """`fn` once in each writer thread: each write holds its writer until all have started,
    so the next write queued goes to another writer. (`fn` must not take the event-order
    lock, which the first would hold while the others wait for it: `_insert_job`, which
    records no event, rather than `jobs.insert`.)"""
    started, barrier = threading.Semaphore(0), threading.Barrier(len(db.writer_threads))
    results: list[T] = []

    def held(tx: Tx) -> T:
        out = fn(tx)
        started.release()
        barrier.wait(10)
        return out

    callers = [
        threading.Thread(target=lambda: results.append(db.write_sync(held)), daemon=True)
        for _ in db.writer_threads
    ]
    for caller in callers:
        caller.start()
        assert started.acquire(timeout=10), "a write failed"
    for caller in callers:
        caller.join(10)
    return results


def test_a_writer_whose_connection_was_cut_carries_on(pg_db: Database) -> None:
    """When the server drops the writers' connections (a restart, an idle timeout), the
    next transaction of each writer gets a live one: the caller sees nothing of it."""
    _on_every_writer(pg_db, lambda tx: _insert_job(tx, job()))
    assert _terminate_others(pg_db) >= len(pg_db.writer_threads)
    rows = _on_every_writer(pg_db, lambda tx: _insert_job(tx, job(type="pdf")))
    assert [r.type for (r,) in rows] == ["pdf"] * len(pg_db.writer_threads)
    assert table_counts(pg_db) == (2 * len(pg_db.writer_threads), 0)  # jobs, no events


def test_a_commit_whose_connection_was_cut_fails_and_the_writer_carries_on(
    pg_db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """The writer commits on the driver's connection: when that COMMIT finds the connection
    cut, the caller gets the error, nothing took effect, and the connection is dropped
    without an attempt to roll it back (which would fail, and log an error)."""

    def cut_before_commit(tx: Tx) -> None:
        _insert_job(tx, job())
        found = tx.driver_cursor().execute("SELECT pg_backend_pid()").fetchone()
        assert found is not None
        with psycopg.connect(_libpq(pg_db), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [found[0]])

    before = table_counts(pg_db)
    with pytest.raises(psycopg.OperationalError):
        pg_db.write_sync(cut_before_commit)
    assert table_counts(pg_db) == before
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    (row,) = pg_db.write_sync(lambda tx: _insert_job(tx, job(type="pdf")))
    assert row.type == "pdf"


def _terminate_others(db: Database) -> int:
    with psycopg.connect(_libpq(db), autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def _on_pooled_connections(db: Database, n: int) -> list[tuple[int, int]]:
    """`table_counts` from `n` threads at once, each on a pooled connection of its own."""
    barrier = threading.Barrier(n)

    def held(tx: Tx) -> None:
        barrier.wait(10)

    results: list[tuple[int, int]] = []

    def read() -> None:
        db.read_sync(held)
        results.append(table_counts(db))

    threads = [threading.Thread(target=read) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def test_readers_whose_connections_were_cut_carry_on(pg_db: Database) -> None:
    """Reads on connections the server dropped run again on live ones: the caller sees
    nothing of it."""
    _on_every_writer(pg_db, lambda tx: _insert_job(tx, job()))
    assert len(_on_pooled_connections(pg_db, 6)) == 6
    assert _terminate_others(pg_db) >= 6
    expected = (len(pg_db.writer_threads), 0)  # jobs, no events
    assert [table_counts(pg_db) for _ in range(3)] == [expected] * 3
    assert _on_pooled_connections(pg_db, 6) == [expected] * 6


def test_a_connection_idle_past_the_ping_interval_is_checked_before_use(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pooled connections are not pinged at every checkout (a round trip per transaction),
    only when idle for a while: a connection dropped meanwhile is replaced before any
    statement runs on it."""
    monkeypatch.setattr(engines, "PING_IDLE_SECONDS", 0.05)
    assert table_counts(pg_db) == (0, 0)
    assert _terminate_others(pg_db) >= 1
    time.sleep(0.1)
    assert table_counts(pg_db) == (0, 0)
    assert pg_db.postgres_readers is not None
    assert pg_db.postgres_readers.lost_at == 0.0  # the ping caught it: no statement failed


def _backend_pid(tx: Tx) -> int:
    return int(tx.conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())


def test_a_writer_keeps_its_connection_and_checks_it_when_it_was_idle(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer runs one transaction after another on the connection it kept (no pool
    checkout and return each time); kept idle past the ping interval, it is checked first,
    and one the server dropped meanwhile is replaced before any statement runs on it."""
    first = pg_db.write_sync(_backend_pid)
    assert [pg_db.write_sync(_backend_pid) for _ in range(5)] == [first] * 5
    monkeypatch.setattr(engines, "PING_IDLE_SECONDS", 0.05)
    assert _terminate_others(pg_db) >= 1
    time.sleep(0.1)
    assert pg_db.write_sync(_backend_pid) != first
    assert pg_db.postgres is not None
    assert pg_db.postgres.lost_at == 0.0  # the ping caught it: no statement failed


def test_a_writer_carries_on_after_a_commit_that_raised(pg_db: Database) -> None:
    """A COMMIT that raised on a live connection (a deferred constraint) leaves nothing
    open on the connection the writer keeps: it goes back to the pool, which rolls it
    back, and the writer's next transactions run as ever."""

    def fails_at_commit(tx: Tx) -> None:
        _insert_job(tx, job())
        tx.conn.exec_driver_sql(
            "CREATE TEMP TABLE deferred (id INT PRIMARY KEY, ref INT REFERENCES deferred"
            " DEFERRABLE INITIALLY DEFERRED) ON COMMIT DROP;"
            " INSERT INTO deferred VALUES (1, 2)"
        )

    with pytest.raises(Exception, match="deferred"):
        pg_db.write_sync(fails_at_commit)
    for _ in range(3):
        pg_db.write_sync(lambda tx: _insert_job(tx, job(type="pdf")))
    assert table_counts(pg_db) == (3, 0)


def _queued_behind_a_held_primary(db: Database, writes: int) -> tuple[list[str], bool]:
    """Hold the primary writer in a transaction, queue `writes` writes meanwhile, and say
    which transaction each ran in, and whether they had all finished before the primary
    was let go."""
    release, started = threading.Event(), threading.Semaphore(0)

    def hold(tx: Tx) -> None:
        started.release()
        assert release.wait(30)

    def xid(tx: Tx) -> str:
        return str(tx.conn.exec_driver_sql("SELECT pg_current_xact_id()::text").scalar())

    primary = threading.Thread(target=db.write_sync, args=(hold,), daemon=True)
    primary.start()
    assert started.acquire(timeout=10)
    with ThreadPoolExecutor(writes) as pool:
        queued = [pool.submit(db.write_sync, xid) for _ in range(writes)]
        done, _ = wait(queued, timeout=1.0)
        finished_while_held = len(done) == writes
        release.set()
        xids = [f.result(timeout=30) for f in queued]
    primary.join(10)
    return xids, finished_while_held


def test_writes_queued_behind_a_short_transaction_share_the_primarys_next(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A helper writer stays out of the way of short transactions: writes queued while the
    primary commits wait for it and share its next transaction (one commit, one insert),
    rather than split into more, smaller transactions."""
    monkeypatch.setattr(db_module, "HELPER_AFTER", 60.0)
    xids, finished_while_held = _queued_behind_a_held_primary(pg_db, 5)
    assert not finished_while_held
    assert len(set(xids)) == 1, xids


def test_writes_queued_behind_a_long_transaction_run_on_a_helper(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction that runs long (a big batch, a row lock waited for) does not hold up
    the writes queued behind it: once it has run HELPER_AFTER, a helper runs them."""
    monkeypatch.setattr(db_module, "HELPER_AFTER", 0.01)
    xids, finished_while_held = _queued_behind_a_held_primary(pg_db, 5)
    assert finished_while_held
    assert len(xids) == 5


def test_reads_are_planned_for_the_table_as_it_is(pg_db: Database) -> None:
    """A read psycopg has prepared is planned anew each time it runs, never by one generic
    plan kept from when the table was small (the feed's read of the events after a cursor,
    planned on an empty job_events, scans and sorts the whole table). Writers keep
    PostgreSQL's default: their statements' generic plans are checked in test_claim."""
    for _ in range(12):  # one at a time: the pool lends the same connection
        assert pg_db.read_sync(events_sql.after, 0, 100) == []

    ((generic, custom),) = pg_db.read_sync(plans_kept, "FROM job_events")
    assert generic == 0 and custom >= 5, (generic, custom)
    mode = pg_db.write_sync(lambda tx: tx.conn.exec_driver_sql("SHOW plan_cache_mode").scalar())
    assert mode == "auto"
