"""Long-poll claims: when nothing is claimable, wait for a job to become claimable.

A waiting claim follows the change feed (the same wake-up as the subscriptions: local
commits, NOTIFY from other replicas on PostgreSQL, the feed's polling otherwise) and tries
again only when a job of its types enters PENDING, so an idle waiter costs nothing. It also
tries again every `recheck` seconds, for jobs whose runAt or retry backoff passes while it
waits (those make no event when they become due).

Of a type with flow limits (`service.job_types`), it also tries again when a job leaves
RUNNING (a place may be free), when the next token of a rate limit is due, and when a
type's pause or limits change.

A waiter whose client went away (`gone` finished) stops waiting; jobs it claimed after
that are given back at once (`give_back`), since nobody will receive them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Collection, Coroutine
from typing import TypeVar

from queuelog.events.feed import EventFeed, Interest
from queuelog.service.job_types import JobTypeService, WaitHints
from queuelog.service.models import Actor, Role, Status
from queuelog.storage import events as events_sql

T = TypeVar("T")
RECHECK_SECONDS = 2.0
# Sees every event, to learn which jobs entered PENDING; what it learns is never shown.
_FEED_READER = Actor("queuelog-claims", Role.ADMIN)
_ENTERED_PENDING = Interest(_FEED_READER, statuses=frozenset({Status.PENDING}))
# ... or left RUNNING (to PENDING or a finished status).
_LEFT_RUNNING = Interest(_FEED_READER, statuses=frozenset(Status) - {Status.RUNNING})


async def claim_waiting(
    feed: EventFeed,
    claim: Callable[[], Awaitable[list[T]]],
    types: Collection[str] | None,
    seconds: float,
    recheck: float = RECHECK_SECONDS,
    flow: JobTypeService | None = None,
    *,
    gone: Callable[[], Coroutine[object, object, object]] | None = None,
    give_back: Callable[[list[T]], Awaitable[object]] | None = None,
) -> list[T]:
    """`claim()`'s jobs, at once if there are any, else as soon as one of `types` (None:
    any) enters PENDING and is claimed, or nothing after `seconds` or once `gone()` ends.
    With `flow`, limited types wake it as the module says."""
    if seconds <= 0 or not feed.running:
        return await claim()
    start = await feed.db.read(events_sql.head)  # before the claim: nothing slips between
    jobs = await claim()
    if jobs:
        return jobs
    woken = asyncio.Event()
    hints = WaitHints() if flow is None else await flow.wait_hints(types)
    interest = _LEFT_RUNNING if hints.limited else _ENTERED_PENDING

    async def listen() -> None:
        async for event in feed.follow(start, interest):
            mine = types is None or event.job_type in types
            if mine and (event.status is Status.PENDING or event.job_type in hints.limited):
                woken.set()
        woken.set()  # the feed stops with the server: answer now

    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    listener = asyncio.create_task(listen())
    left = asyncio.create_task(gone()) if gone is not None else None
    if left is not None:
        left.add_done_callback(lambda _: woken.set())
    watching = contextlib.nullcontext() if flow is None else flow.watching(woken.set)
    try:
        with watching:
            while (remaining := deadline - loop.time()) > 0:
                wait = min(remaining, recheck, hints.token_in or recheck)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await woken.wait()
                woken.clear()
                if left is not None and left.done():
                    return []
                jobs = await claim()
                if jobs and left is not None and left.done():
                    if give_back is not None:
                        await give_back(jobs)
                    return []
                if jobs or listener.done():
                    return jobs
                if hints.limited and flow is not None:
                    hints = await flow.wait_hints(types)
        return []
    finally:
        for task in (listener, left):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):  # CursorExpired
                    await task
