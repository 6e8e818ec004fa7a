"""The lock order on PostgreSQL (docs/design.md, "Lock order"): row locks first, job-type
rows in name order, the job counter rows last (taken by the append of a transaction's
events). A replay, on two connections, of the inversion that once deadlocked: an enqueue
that claims for a waiting worker in its own transaction (insert, then a limited claim)
against a limited claim that appends its events; and two appends that do not wait for
each other, with the feed's horizon held below the one still running.
"""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack
from datetime import timedelta
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from queuelog.storage import driver
from queuelog.storage import events as events_sql
from queuelog.storage import job_types as types_sql
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database
from queuelog.storage.tx import Tx
from tests.storage.rows import T0, events_of, insert, job

pytestmark = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
WAIT = 30.0  # seconds: generous, for a loaded machine; the test waits on conditions


def _claim(tx: Tx, name: str = "email") -> list[int]:
    rows = types_sql.claim_limited(
        tx, worker="w1", now=T0, name=name, limit=5, lease_until=T0 + timedelta(seconds=60)
    )
    return [r.id for r in rows]


def _connection(stack: ExitStack, db: Database) -> tuple[sa.Connection, Tx, int]:
    conn = stack.enter_context(db.writer.connect())
    # A deadlock is found fast; a wait that never ends fails the test instead of hanging it.
    conn.exec_driver_sql("SET deadlock_timeout = '50ms'")
    conn.exec_driver_sql("SET lock_timeout = '60s'")
    pid = int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
    return conn, Tx(conn, db.sql), pid


def _waiting_for_a_lock(db: Database, pid: int) -> None:
    """Until the backend `pid` waits for a lock (its statement has reached the wait)."""
    deadline = time.monotonic() + WAIT
    query = sa.text("SELECT wait_event_type FROM pg_stat_activity WHERE pid = :pid")
    while time.monotonic() < deadline:
        with db.reader.connect() as conn:
            if conn.execute(query, {"pid": pid}).scalar() == "Lock":
                return
        time.sleep(0.01)
    raise AssertionError(f"backend {pid} never waited for a lock")


class _InThread:
    """`fn()` in a thread of its own; `result()` its value or what it raised."""

    def __init__(self, fn: Any) -> None:
        self.value: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn: Any) -> None:
        try:
            self.value = fn()
        except BaseException as exc:
            self.error = exc

    def result(self) -> Any:
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "still waiting"
        if self.error is not None:
            raise self.error
        return self.value


def test_enqueue_then_limited_claim_against_a_claim_appending_its_events(db: Database) -> None:
    """A: the hand-off's transaction, an insert and then a limited claim of its type. B: a
    limited claim of that type, its events appended at its end. A waits for B's row lock;
    B appends its events and commits (it would have waited for A's event-order lock, taken
    by the insert, had A taken it there); then A claims and appends. No deadlock."""
    db.write_sync(types_sql.upsert, "email", {"max_running": 5, "updated_at": T0})
    (first,) = insert(db, job(type="email"))
    with ExitStack() as stack:
        a, tx_a, pid_a = _connection(stack, db)
        b, tx_b, _ = _connection(stack, db)
        assert _claim(tx_b) == [first]  # B holds email's row
        (new,) = jobs_sql.insert(tx_a, [job(type="email")])
        assert not tx_a.appended  # its events wait for the end: the lock order
        a_claims = _InThread(lambda: _claim(tx_a))
        _waiting_for_a_lock(db, pid_a)  # A waits for email's row
        driver.insert_events(tx_b, tx_b.events)  # B's append at commit: no wait
        b.commit()
        assert a_claims.result() == [new.id]
        driver.insert_events(tx_a, tx_a.events)
        a.commit()
    assert events_of(db, first) == [(None, "pending"), ("pending", "running")]
    assert events_of(db, new.id) == [(None, "pending"), ("pending", "running")]


def _appending(stack: ExitStack, db: Database) -> tuple[sa.Connection, Tx, int]:
    """A transaction that has inserted a job and appended its creation event, uncommitted."""
    conn, tx, _ = _connection(stack, db)
    tx.closing = True  # an insert run last appends its events in the same statement
    (row,) = jobs_sql.insert(tx, [job(type="email")])
    assert tx.appended
    return conn, tx, row.id


def _first_event(db: Database, job_id: int) -> int:
    with db.reader.connect() as conn:
        found = conn.execute(
            sa.text("SELECT min(id) FROM job_events WHERE job_id = :j"), {"j": job_id}
        )
        return int(found.scalar_one())


def _head(db: Database) -> int:
    return db.read_sync(events_sql.head)


def test_appends_do_not_wait_for_each_other_and_the_feed_waits_for_the_oldest(
    db: Database,
) -> None:
    """Two transactions append events at once: neither waits for the other (no
    cluster-wide lock). The feed's head stays below the uncommitted transaction's event
    even after a later one commits, and passes it once it commits."""
    with ExitStack() as stack:
        a, _, job_a = _appending(stack, db)
        b, _, job_b = _appending(stack, db)  # would wait here for a common lock
        b.commit()
        event_b = _first_event(db, job_b)
        head = _head(db)
        assert head < event_b  # A's event, drawn first, may still commit
        a.commit()
        assert _head(db) >= max(event_b, _first_event(db, job_a))


def test_a_transaction_that_appended_its_events_never_waits_for_a_type_row(
    db: Database,
) -> None:
    """Belt and braces: a limited claim in a transaction that already appended its events
    (and holds counter rows) skips a type whose row another transaction holds, rather than
    wait for it."""
    db.write_sync(types_sql.upsert, "email", {"max_running": 5, "updated_at": T0})
    insert(db, job(type="email"))
    with ExitStack() as stack:
        a, tx_a, _ = _connection(stack, db)
        b, tx_b, _ = _connection(stack, db)
        assert len(_claim(tx_b)) == 1  # B holds email's row
        tx_a.closing = True  # an insert run last: it appends its events
        jobs_sql.insert(tx_a, [job(type="email")])
        assert tx_a.appended
        assert _claim(tx_a) == []  # skipped, not waited for
        a.rollback()
        b.rollback()


def test_setting_a_type_in_a_transaction_holding_a_later_type_does_not_wait(
    db: Database,
) -> None:
    """Type rows are waited for in name order only: a transaction that holds `sync`'s row
    takes `email`'s (earlier) only if it is free, else fails at once (its writer then runs
    the write again alone)."""
    for name in ("email", "sync"):
        db.write_sync(types_sql.upsert, name, {"max_running": 5, "updated_at": T0})
    with ExitStack() as stack:
        a, tx_a, _ = _connection(stack, db)
        b, tx_b, _ = _connection(stack, db)
        types_sql.upsert(tx_b, "email", {"paused": True, "updated_at": T0})  # B holds email's row
        assert _claim(tx_a, "sync") == []  # A holds sync's row
        with pytest.raises(sa.exc.OperationalError) as refused:
            types_sql.upsert(tx_a, "email", {"max_running": 3, "updated_at": T0})
        assert isinstance(refused.value.orig, psycopg.errors.LockNotAvailable)
        a.rollback()
        b.rollback()
