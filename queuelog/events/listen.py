"""PostgreSQL LISTEN: wake the feed's reader when another process commits events.

Every write transaction that appends events ends with `NOTIFY queuelog_events`. Poolers in
transaction mode drop notifications, and a listening connection can break: the reader polls
as well, so this only shortens the wait.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import psycopg
from psycopg import pq, sql

log = logging.getLogger("queuelog.events")


async def listen(url: str, channel: str, wake: Callable[[], None], retry: float = 1.0) -> None:
    """Call `wake` on every notification on `channel`, until cancelled; reconnect on errors."""
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                wake()  # whatever was committed while nobody listened
                await _notifications(conn.pgconn, wake)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("LISTEN %s failed; polling until it reconnects", channel, exc_info=True)
        await asyncio.sleep(retry)


async def _notifications(pgconn: pq.abc.PGconn, wake: Callable[[], None]) -> None:
    """Call `wake` once for whatever notifications each read of the socket brings, until
    the connection fails (raised). Straight on libpq: psycopg's `notifies()` generator
    costs event-loop time per notification, and every write transaction sends one."""
    loop = asyncio.get_running_loop()
    failed: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        try:
            pgconn.consume_input()
            if pgconn.status != pq.ConnStatus.OK:
                raise psycopg.OperationalError("the LISTEN connection was closed")
        except Exception as exc:
            if not failed.done():
                failed.set_exception(exc)
            return
        woken = False
        while pgconn.notifies() is not None:
            woken = True
        if woken:
            wake()

    fd = pgconn.socket
    loop.add_reader(fd, readable)
    try:
        await failed
    finally:
        loop.remove_reader(fd)
