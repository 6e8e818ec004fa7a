"""The writers' batches: writes queued together, run as one transaction, and settled."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import sqlalchemy as sa

from queuelog.storage.dialect import Dialect
from queuelog.storage.tx import Tx


class ConnectionLost(Exception):
    """The writes failed because their connection was gone: they may run again."""


class CommitFailed(Exception):
    """The writes ran, with these `outcomes`, and then their COMMIT raised `error`."""

    def __init__(self, error: Exception, outcomes: list[Outcome], tx: Tx) -> None:
        super().__init__(error)
        self.error, self.outcomes, self.tx = error, outcomes, tx


@dataclass(frozen=True, slots=True)
class Rows:
    """A queued `write_rows`."""

    fn: Callable[[Tx, list[Any]], list[Any]]
    rows: list[Any]


Call = Callable[["Tx"], Any] | Rows
# A write, where its result goes, and the event loop to settle it on (None: write_sync's).
Future = asyncio.Future[Any] | concurrent.futures.Future[Any]
Queued = tuple[Call, Future, asyncio.AbstractEventLoop | None]
Settled = tuple[Future, bool, Any]


Outcome = tuple[bool, Any]  # (True, a write's result) or (False, the error it raised)


def run_calls(tx: Tx, calls: list[Call]) -> list[Outcome]:
    """Each call's outcome, in order. The `Rows` run last, those of one function as one call
    over all their rows: concurrent inserts become one statement, and on PostgreSQL, where
    that statement appends their events and locks job counter rows (held until COMMIT),
    the other writes of the transaction run before it, not after it. (The writes of one
    batch were queued concurrently: no caller can tell the order they ran in.) They run
    with `tx.closing` set, so a `Rows` function must take no lock but the counter rows
    (docs/design.md, "Lock order").

    With more than one call, a call that raises costs only itself: it is undone to its own
    savepoint and gets its error, the rest go on (a `Rows` call that raises runs again for
    each of its writers apart). A lone call's error, or one that leaves the transaction
    unusable (its connection gone), raises for the whole batch."""
    guarded = len(calls) > 1
    outcomes: list[Outcome] = [(False, None)] * len(calls)
    groups: dict[Callable[[Tx, list[Any]], list[Any]], list[tuple[int, Rows]]] = {}
    for i, call in enumerate(calls):
        if isinstance(call, Rows):
            groups.setdefault(call.fn, []).append((i, call))
        else:
            outcomes[i] = _run(tx, call, guarded)
    tx.closing = bool(groups)
    for fn, members in groups.items():
        ok, out = _run(tx, functools.partial(_all_rows, fn, members), guarded)
        if not ok and len(members) > 1:  # whose rows failed? each writer's apart
            for i, member in members:
                outcomes[i] = _run(tx, functools.partial(_all_rows, fn, [(i, member)]), True)
            continue
        start = 0
        for i, member in members:
            outcomes[i] = (True, out[start : start + len(member.rows)]) if ok else (ok, out)
            start += len(member.rows)
    return outcomes


def isolated(tx: Tx, call: Callable[[Tx], Any]) -> Outcome:
    """`call`'s outcome, under a savepoint: if it raises, only its own work is undone."""
    return _run(tx, call, True)


def _all_rows(
    fn: Callable[[Tx, list[Any]], list[Any]], members: list[tuple[int, Rows]], tx: Tx
) -> list[Any]:
    return fn(tx, [row for _, member in members for row in member.rows])


def _run(tx: Tx, call: Callable[[Tx], Any], guarded: bool) -> Outcome:
    """`call`'s outcome; `guarded`: under a savepoint, undone to it if it raises."""
    if not guarded:
        return True, call(tx)
    events, deltas, done, appended = len(tx.events), len(tx.deltas), set(tx.done), tx.appended
    cur = tx.driver_cursor()
    cur.execute(tx.dialect.SAVEPOINT)
    try:
        return True, call(tx)
    except Exception as exc:
        if tx.dialect.connection_gone(tx.conn):
            raise
        try:
            cur.execute(tx.dialect.ROLLBACK_TO_SAVEPOINT)
        except Exception:
            raise exc from None
        del tx.events[events:]
        del tx.deltas[deltas:]
        tx.done, tx.appended = done, appended
        return False, exc


def database_error(exc: BaseException) -> bool:
    """Whether `exc` came from the database (it may not recur: a deadlock, a lost race),
    rather than from a rule a write applies."""
    return isinstance(exc, sa.exc.SQLAlchemyError | sqlite3.Error | psycopg.Error)


def invalidate_if_lost(conn: sa.Connection, dialect: Dialect) -> bool:
    """Have the pool drop `conn` if it is gone (else it would try to roll it back, and log
    that failing); whether it was."""
    if not dialect.connection_gone(conn):
        return False
    with contextlib.suppress(Exception):
        conn.invalidate()
    return True


@contextlib.contextmanager
def marking_lost(tx: Tx, retry: bool) -> Iterator[None]:
    """Within a transaction, before its COMMIT: an error that found `tx`'s connection gone
    invalidates it (the pool drops it, and nothing tries to roll back on it) and becomes
    ConnectionLost (if `retry`), so that the caller runs the work once more."""
    try:
        yield
    except Exception as exc:
        if invalidate_if_lost(tx.conn, tx.dialect) and retry:
            raise ConnectionLost from exc
        raise


def settle(settled: list[Settled]) -> None:
    for future, ok, value in settled:
        if future.cancelled():
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
