"""The writers' batches: writes queued together, run as one transaction, and settled."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from queuelog.storage.dialects import Dialect
from queuelog.storage.tx import Tx


class ConnectionLost(Exception):
    """The writes failed because their connection was gone: they may run again."""


class CommitFailed(Exception):
    """The writes ran, and then their COMMIT raised `error`."""

    def __init__(self, error: Exception, results: list[Any], tx: Tx) -> None:
        super().__init__(error)
        self.error, self.results, self.tx = error, results, tx


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


def run_calls(tx: Tx, calls: list[Call]) -> list[Any]:
    """Each call's result, in order. The `Rows` run last, those of one function as one call
    over all their rows: concurrent inserts become one statement, and on PostgreSQL, where
    that statement takes the event-order lock (held until COMMIT), the other writes of the
    transaction run before it, not under it. (The writes of one batch were queued
    concurrently: no caller can tell the order they ran in.)"""
    results: list[Any] = [None] * len(calls)
    groups: dict[Callable[[Tx, list[Any]], list[Any]], list[tuple[int, Rows]]] = {}
    for i, call in enumerate(calls):
        if isinstance(call, Rows):
            groups.setdefault(call.fn, []).append((i, call))
        else:
            results[i] = call(tx)
    for fn, members in groups.items():
        out = fn(tx, [row for _, member in members for row in member.rows])
        start = 0
        for i, member in members:
            results[i] = out[start : start + len(member.rows)]
            start += len(member.rows)
    return results


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
