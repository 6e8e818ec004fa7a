"""Long-poll claims: when nothing is claimable, wait for a job to become claimable.

The waiting claims of a process wait in line (`Waiters`, one per feed). While any waits, one
follower of the change feed (the same wake-up as the subscriptions: local commits, NOTIFY
from other replicas on PostgreSQL, the feed's polling otherwise) wakes, for each job that
enters PENDING, the first waiter in line that wants its type and is not woken yet: a job
wakes one claim, not all of them, and an idle waiter costs only its recheck. A claim that
finds jobs at once never joins the line; every waiter claims after joining it, and a woken
one claims after its wake, so a claim that finds nothing proves nothing of its types was
claimable then; it keeps its place. A waiter that leaves without having used its wake (its
client left, its time ran out, or it claimed jobs of other types) hands the wake to the next
in line. Each waiter also tries again every `recheck` seconds, for jobs whose runAt or retry
backoff passes while it waits (those make no event when they become due).

Of a type with flow limits (`service.job_types`), every waiter that wants it tries again
when a job of it leaves RUNNING (a place may be free), and every waiter tries again when the
next token of its rate limit is due and when a type's pause or limits change: those are rare
next to new jobs, and a place freed on another replica is not counted here, so waking all of
them is the rule that cannot miss one.

A waiter whose client went away (`gone` finished) stops waiting; jobs it claimed after that
are given back at once (`give_back`), since nobody will receive them."""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Awaitable, Callable, Collection, Coroutine
from typing import Protocol, TypeVar

from queuelog.events.feed import EventFeed, Interest
from queuelog.service.job_types import JobTypeService, WaitHints
from queuelog.service.models import Actor, JobEvent, Role, Status
from queuelog.storage import events as events_sql


class Typed(Protocol):
    @property
    def type(self) -> str: ...


T = TypeVar("T", bound=Typed)
RECHECK_SECONDS = 2.0
# Sees every event, to learn which jobs entered PENDING or left RUNNING (to PENDING or a
# finished status); what it learns is never shown.
_FEED_READER = Actor("queuelog-claims", Role.ADMIN)
_LEFT_RUNNING = Interest(_FEED_READER, statuses=frozenset(Status) - {Status.RUNNING})


class Waiter:
    """One waiting claim of `types` (None: any), woken by a job of its types, by a place
    freeing in one of its `limited` types, by its client leaving, or by the feed stopping
    (`ended`)."""

    def __init__(self, types: Collection[str] | None, flow: bool) -> None:
        self.types = types
        # Until its hints are read, any type it wants may be limited.
        self.limited: frozenset[str] | None = None if flow else frozenset()
        self.woken = asyncio.Event()
        self.called: str | None = None  # the job type it was woken for, not claimed since
        self.ended = False

    def wants(self, job_type: str) -> bool:
        return self.types is None or job_type in self.types

    def wake(self) -> None:
        self.woken.set()


class Waiters:
    """The waiting claims of one feed, in line, and the one follower that wakes them."""

    def __init__(self) -> None:
        self.line: list[Waiter] = []
        self._ready: asyncio.Future[None] | None = None
        self._follower: asyncio.Task[None] | None = None

    async def join(self, waiter: Waiter, feed: EventFeed) -> None:
        """Take a place in line. From the return on, every job that enters PENDING wakes
        someone in line."""
        self.line.append(waiter)
        if self._ready is None:
            self._ready = asyncio.get_running_loop().create_future()
            self._follower = asyncio.create_task(self._follow(feed, self._ready))
        await asyncio.shield(self._ready)

    def leave(self, waiter: Waiter) -> None:
        self.line.remove(waiter)
        if waiter.called is not None:  # woken for a job it did not take: the next one is
            self.wake_one(waiter.called)
        if not self.line and self._follower is not None:
            self._follower.cancel()
            self._follower = self._ready = None

    def wake_one(self, job_type: str) -> None:
        for waiter in self.line:
            if waiter.called is None and waiter.wants(job_type):
                waiter.called = job_type
                waiter.wake()
                return

    def _woken_by(self, event: JobEvent) -> None:
        job_type = event.job_type
        if event.status is Status.PENDING:
            self.wake_one(job_type)
        if event.previous_status is Status.RUNNING:
            for waiter in self.line:
                limited = waiter.limited is None or job_type in waiter.limited
                if limited and waiter.wants(job_type):
                    waiter.wake()

    async def _follow(self, feed: EventFeed, ready: asyncio.Future[None]) -> None:
        try:
            start = await feed.db.read(events_sql.head)
            ready.set_result(None)
            async for event in feed.follow(start, _LEFT_RUNNING):
                self._woken_by(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # e.g. CursorExpired: every waiter claims once more
            if not ready.done():
                ready.set_exception(exc)
        finally:
            if self._ready is ready:  # the feed stopped or failed: answer now
                self._follower = self._ready = None
                for waiter in self.line:
                    waiter.ended = True
                    waiter.wake()


# Waiters keep no reference to their feed (only a running follower does), so a feed that
# is gone takes its line with it.
_WAITERS: weakref.WeakKeyDictionary[EventFeed, Waiters] = weakref.WeakKeyDictionary()


def waiters_of(feed: EventFeed) -> Waiters:
    found = _WAITERS.get(feed)
    if found is None:
        found = _WAITERS[feed] = Waiters()
    return found


async def claim_waiting(
    feed: EventFeed,
    claim: Callable[[], Awaitable[list[T]]],
    types: Collection[str] | None,
    seconds: float,
    recheck: float | None = None,
    flow: JobTypeService | None = None,
    *,
    gone: Callable[[], Coroutine[object, object, object]] | None = None,
    give_back: Callable[[list[T]], Awaitable[object]] | None = None,
) -> list[T]:
    """`claim()`'s jobs, at once if there are any, else as soon as one of `types` (None:
    any the claim may take) enters PENDING and is claimed, or nothing after `seconds`
    (trying again every `recheck`, default RECHECK_SECONDS) or once `gone()` ends. With
    `flow`, limited types wake it as the module says."""
    if seconds <= 0 or not feed.running:
        return await claim()
    # A busy worker's claim finds jobs at once: it never takes a place in line (which
    # starts the feed's follower and its reads). One that finds nothing claims again
    # after joining, so a job that came in between is not missed.
    jobs = await claim()
    if jobs:
        return jobs
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    every = RECHECK_SECONDS if recheck is None else recheck
    waiters, me = waiters_of(feed), Waiter(types, flow is not None)
    hints: WaitHints | None = None
    left = asyncio.create_task(gone()) if gone is not None else None
    if left is not None:
        left.add_done_callback(lambda _: me.wake())
    watching = contextlib.nullcontext() if flow is None else flow.watching(me.wake)
    try:
        with watching:
            await waiters.join(me, feed)
            while True:
                me.woken.clear()
                took, me.called = me.called, None
                jobs = await claim()
                if jobs:
                    if took is not None and all(job.type != took for job in jobs):
                        # It took others: the wake goes on (passed at its leave if back to it).
                        waiters.wake_one(took)
                    break
                if me.ended or (remaining := deadline - loop.time()) <= 0:
                    break
                if hints is None or (flow is not None and hints.limited):
                    hints = WaitHints() if flow is None else await flow.wait_hints(types)
                    me.limited = hints.limited
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(remaining, every, hints.token_in or every)):
                        await me.woken.wait()
                if left is not None and left.done():
                    return []
        if jobs and left is not None and left.done():
            if give_back is not None:
                await give_back(jobs)
            return []
        return jobs
    finally:
        waiters.leave(me)
        if left is not None:
            left.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await left
