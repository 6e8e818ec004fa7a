"""The lock order on PostgreSQL (docs/design.md, "Lock order"): row locks first, job-type
rows in name order, the event-order advisory lock last. A replay, on two connections, of
the inversion that deadlocked: an enqueue that claims for a waiting worker in its own
transaction (insert, then a limited claim) against a limited claim that appends its events.
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
from queuelog.storage import job_types as types_sql
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database
from queuelog.storage.postgresql.dialect import EVENT_LOCK_KEY
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


def test_the_old_order_deadlocks(db: Database) -> None:
    """The control: the same two transactions with A taking the event-order lock before
    the row lock, as the insert used to. PostgreSQL ends one of them for a deadlock, so the
    replay above does reach the inversion it guards against."""
    db.write_sync(types_sql.upsert, "email", {"max_running": 5, "updated_at": T0})
    insert(db, job(type="email"))
    with ExitStack() as stack:
        a, _, pid_a = _connection(stack, db)
        b, tx_b, _ = _connection(stack, db)
        assert len(_claim(tx_b)) == 1
        a.exec_driver_sql(f"SELECT pg_advisory_xact_lock({EVENT_LOCK_KEY})")
        a_locks = _InThread(
            lambda: a.exec_driver_sql("SELECT 1 FROM job_types WHERE name = 'email' FOR UPDATE")
        )
        _waiting_for_a_lock(db, pid_a)
        errors: list[BaseException] = []
        try:
            driver.insert_events(tx_b, tx_b.events)
        except psycopg.errors.DeadlockDetected as exc:
            errors.append(exc)
            b.rollback()
        try:
            a_locks.result()
        except sa.exc.OperationalError as exc:
            errors.append(exc)
        assert len(errors) == 1  # one was the victim; the other went on
        a.rollback()
        b.rollback()


def test_a_transaction_holding_the_event_order_lock_never_waits_for_a_type_row(
    db: Database,
) -> None:
    """Belt and braces: a limited claim in a transaction that already holds the event-order
    lock skips a type whose row another transaction holds, rather than wait for it."""
    db.write_sync(types_sql.upsert, "email", {"max_running": 5, "updated_at": T0})
    insert(db, job(type="email"))
    with ExitStack() as stack:
        a, tx_a, _ = _connection(stack, db)
        b, tx_b, _ = _connection(stack, db)
        assert len(_claim(tx_b)) == 1  # B holds email's row
        tx_a.closing = True  # an insert run last: it appends its events, under the lock
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
