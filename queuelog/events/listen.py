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
from psycopg import sql

log = logging.getLogger("queuelog.events")


async def listen(url: str, channel: str, wake: Callable[[], None], retry: float = 1.0) -> None:
    """Call `wake` on every notification on `channel`, until cancelled; reconnect on errors."""
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                wake()  # whatever was committed while nobody listened
                async for _ in conn.notifies():
                    wake()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("LISTEN %s failed; polling until it reconnects", channel, exc_info=True)
        await asyncio.sleep(retry)
