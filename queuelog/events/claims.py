"""Long-poll claims: when nothing is claimable, wait for a job to become claimable.

The waiting claims of a process wait in line (`Waiters`, one per feed). While any waits, one
follower of the change feed (the same wake-up as the subscriptions: local commits, NOTIFY
from other replicas on PostgreSQL, the feed's polling otherwise) wakes, for each job that
enters PENDING, the first waiter in line that wants its type and is not woken yet: a job
wakes one claim, not all of them, and idle waiters cost only their shared recheck. A claim
that finds jobs at once never joins the line; every waiter claims after joining it, and a
woken one claims after its wake, so a claim that finds nothing proves nothing of its types
was claimable then; it keeps its place. A waiter that leaves without having used its wake
(its client left, its time ran out, or it claimed jobs of other types) hands the wake to the
next in line.

Jobs whose runAt or retry backoff passes while claims wait make no event when they become
due: the waiters try again every `recheck` seconds for them. A claim that finds nothing
proves it for every waiter of the same types, so those recheck together (`Recheck`): one of
them claims each period, counted from the latest claim of those types that found nothing,
and only if that one finds jobs does the next one try, at once.

Of a type with flow limits (`service.job_types`), a job of it leaving RUNNING (a place may
be free, on any replica: the feed reads every replica's events) wakes the first waiter in
line that wants it and is not woken yet, as a new job does; one that leaves without using
the wake hands it on. Of the waiters that want the same types, one (`Recheck.token_holder`)
tries again when the next token of their rate limit is due, and hands that role to another
when it leaves. Every waiter tries again when a type's pause or limits change (rare).

One key may have at most `max_waiting` claims waiting in this process; one more is refused
(ValidationFailed), once its first claim found nothing.

A waiter whose client went away (`gone` finished) stops waiting; jobs it claimed after that
are given back at once (`give_back`), since nobody will receive them. A waiter whose key is
revoked stops too (KeyRevoked): every claim it makes after the first confirms its key as an
HTTP request would, and a revocation heard of (here, or another replica's NOTIFY) wakes it to
confirm at once; jobs it got as its key was revoked are given back.

Jobs enqueued through this process wake its waiters as soon as their transaction commits
(`PendingHints`, told by the job service), without waiting for the feed to read their
events back; the feed then passes over those events, so a job still wakes one claim."""

from __future__ import annotations

import asyncio
import contextlib
import math
import weakref
from collections.abc import Awaitable, Callable, Collection, Coroutine, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, cast

from queuelog.events.feed import EventFeed, Interest
from queuelog.events.sessions import KeyRevoked, Session
from queuelog.service import validation
from queuelog.service.errors import ValidationFailed
from queuelog.service.handoff import Standing
from queuelog.service.job_types import JobTypeService, WaitHints
from queuelog.service.jobs import JobService
from queuelog.service.models import Actor, Job, JobEvent, Role, Status
from queuelog.service.observer import JobObserver
from queuelog.storage import events as events_sql


class Typed(Protocol):
    @property
    def type(self) -> str: ...


T = TypeVar("T", bound=Typed)
RECHECK_SECONDS = 2.0
HINTED_MAX = 10_000  # jobs announced ahead of the feed, remembered until it passes them
# Sees every event, to learn which jobs entered PENDING or left RUNNING (to PENDING or a
# finished status); what it learns is never shown.
_FEED_READER = Actor("queuelog-claims", Role.ADMIN)


@dataclass(frozen=True, slots=True)
class ClaimArgs:
    """What a client's claim asks for (`claim_for`), as its API received it."""

    types: Sequence[str] | None = None
    lease_seconds: int | None = None
    limit: int = 1
    wait_seconds: int | None = 0


_LEFT_RUNNING = Interest(_FEED_READER, statuses=frozenset(Status) - {Status.RUNNING})


class Waiter:
    """One waiting claim of `types` (None: any), woken by a job of its types, by a place
    freeing in one of its `limited` types, by its client leaving, or by the feed stopping
    (`ended`)."""

    def __init__(self, types: Collection[str] | None, flow: bool, key: str | None = None) -> None:
        self.types = types
        self.key = key  # the name of the API key it claims with
        # Until its hints are read, any type it wants may be limited.
        self.limited: frozenset[str] | None = None if flow else frozenset()
        self.woken = False  # it has a reason to claim again
        self.stirred = asyncio.Event()  # woken, or its `Recheck` may have its turn
        self.called: str | None = None  # the job type it was woken for, not claimed since
        self.ended = False

    def wants(self, job_type: str) -> bool:
        return self.types is None or job_type in self.types

    def wake(self) -> None:
        self.woken = True
        self.stirred.set()


class Recheck:
    """The timed rechecks of the waiters that want the same types. Each period one of them
    claims (the `checker`); a claim of theirs that finds nothing, begun at `empty_at`,
    stands for all of them until `empty_at + every`."""

    def __init__(self) -> None:
        self.members: list[Waiter] = []
        self.empty_at = -math.inf
        self.checker: Waiter | None = None
        self.token_holder: Waiter | None = None  # claims when their rate's next token is due

    def token_turn(self, me: Waiter) -> bool:
        """Whether `me` is the member that claims at the next token (taking the role if
        nobody holds it)."""
        if self.token_holder is None:
            self.token_holder = me
        return self.token_holder is me

    async def pause(self, me: Waiter, every: float, until: float) -> None:
        """Return when `me` is woken, at `until`, or when it is `me`'s turn to claim for
        the others (it is then the checker until its claim's outcome is `claimed`)."""
        loop = asyncio.get_running_loop()
        while not me.woken and (now := loop.time()) < until:
            if self.checker is None:
                if now >= self.empty_at + every:
                    self.checker = me
                    return
                wake_at = min(until, self.empty_at + every)
            else:  # told if its claim finds jobs or fails, else its outcome covers us
                wake_at = min(until, now + every)
            me.stirred.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(wake_at):
                    await me.stirred.wait()

    def claimed(self, me: Waiter, started: float, found: bool) -> None:
        """`me`'s claim begun at `started` found jobs or not."""
        if not found:
            self.empty_at = max(self.empty_at, started)
        if self.checker is me:
            self.released(me, covered=not found)

    def released(self, me: Waiter, covered: bool = False) -> None:
        """`me` checks no more; unless its claim covered them, the next one checks now."""
        if self.checker is me:
            self.checker = None
            if not covered:
                for waiter in self.members:
                    waiter.stirred.set()


class Waiters:
    """The waiting claims of one feed, in line, and the one follower that wakes them."""

    def __init__(self) -> None:
        self.line: list[Waiter] = []
        self.rechecks: dict[frozenset[str] | None, Recheck] = {}
        self._ready: asyncio.Future[None] | None = None
        self._follower: asyncio.Task[None] | None = None
        self._hinted: set[int] = set()  # new jobs that woke a waiter before the feed saw them
        self.per_key: dict[str, int] = {}  # waiters in line by key name

    def admit(self, key: str | None, most: int | None) -> None:
        """Refuse one more waiter of `key` when it has `most` in line already."""
        if key is not None and most is not None and self.per_key.get(key, 0) >= most:
            raise ValidationFailed(
                f"this API key has {most} claims waiting on this server already, the most "
                "it may have (QUEUELOG_MAX_WAITING_CLAIMS_PER_KEY): claim without "
                "waitSeconds, or once one of them is answered",
                ["waitSeconds"],
            )

    async def join(self, waiter: Waiter, feed: EventFeed) -> Recheck:
        """Take a place in line. From the return on, every job that enters PENDING wakes
        someone in line. Returns the rechecks the waiter shares with those of its types."""
        self.line.append(waiter)
        if waiter.key is not None:
            self.per_key[waiter.key] = self.per_key.get(waiter.key, 0) + 1
        recheck = self.rechecks.setdefault(_types_key(waiter), Recheck())
        recheck.members.append(waiter)
        if self._ready is None:
            self._ready = asyncio.get_running_loop().create_future()
            self._follower = asyncio.create_task(self._follow(feed, self._ready))
        await asyncio.shield(self._ready)
        return recheck

    def leave(self, waiter: Waiter) -> None:
        self.line.remove(waiter)
        if waiter.key is not None:
            if (n := self.per_key[waiter.key] - 1) > 0:
                self.per_key[waiter.key] = n
            else:
                del self.per_key[waiter.key]
        key = _types_key(waiter)
        recheck = self.rechecks[key]
        recheck.members.remove(waiter)
        recheck.released(waiter)
        if recheck.token_holder is waiter:  # another claims now, then holds the role
            recheck.token_holder = None
            if recheck.members:
                recheck.members[0].wake()
        if not recheck.members:
            del self.rechecks[key]
        if waiter.called is not None:  # woken for a job it did not take: the next one is
            self.wake_one(waiter.called)
        if not self.line and self._follower is not None:
            self._follower.cancel()
            self._follower = self._ready = None
            self._hinted.clear()

    def wake_one(self, job_type: str) -> None:
        for waiter in self.line:
            if waiter.called is None and waiter.wants(job_type):
                waiter.called = job_type
                waiter.wake()
                return

    def hint(self, jobs: Sequence[Job]) -> None:
        """New jobs just committed by this process: each still PENDING wakes a waiter now
        (one handed to a waiting claim in its enqueue's transaction is RUNNING already),
        and the feed passes over their events later."""
        if self._ready is None or not self._ready.done():
            return  # nobody waits, or the feed's follower has not read its start yet
        if len(self._hinted) > HINTED_MAX:
            self._hinted.clear()  # the feed lost some: at worst a job wakes two claims
        for job in jobs:
            self._hinted.add(job.id)
            if job.status is Status.PENDING:
                self.wake_one(job.type)

    def _woken_by(self, event: JobEvent) -> None:
        job_type = event.job_type
        if event.status is Status.PENDING:
            if event.previous_status is None and event.job_id in self._hinted:
                self._hinted.discard(event.job_id)
            else:
                self.wake_one(job_type)
        if event.previous_status is Status.RUNNING:
            self.wake_freed(job_type)

    def wake_freed(self, job_type: str) -> None:
        """A job of `job_type` left RUNNING: the first waiter for which that type is
        limited and that is not woken yet claims for the place it may have freed."""
        for waiter in self.line:
            limited = waiter.limited is None or job_type in waiter.limited
            if limited and not waiter.woken and waiter.wants(job_type):
                if waiter.called is None:  # handed on if it leaves without using it
                    waiter.called = job_type
                waiter.wake()
                return

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


class PendingHints(JobObserver):
    """Tells the waiting claims of `feed` of the jobs this process enqueues."""

    def __init__(self, feed: EventFeed) -> None:
        self.feed = feed

    def enqueued(self, jobs: Sequence[Job]) -> None:
        waiters_of(self.feed).hint(jobs)


def _types_key(waiter: Waiter) -> frozenset[str] | None:
    return None if waiter.types is None else frozenset(waiter.types)


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
    offer: Callable[[], Standing] | None = None,
    key: tuple[str, Callable[[], Awaitable[bool]]] | None = None,
    max_waiting: int | None = None,
) -> list[T]:
    """`claim()`'s jobs, at once if there are any, else as soon as one of `types` (None:
    any the claim may take) enters PENDING and is claimed, or nothing after `seconds`
    (its types' waiters trying again every `recheck`, default RECHECK_SECONDS) or once
    `gone()` ends. With
    `flow`, limited types wake it as the module says. With `offer`, it stands in line for
    enqueues to claim for it while it pauses (`service.handoff`). With `key` (its name, and
    whether it is live now), it ends with KeyRevoked once the key is revoked, and it is
    refused (ValidationFailed) when the key has `max_waiting` claims waiting already."""
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
    waiters = waiters_of(feed)
    waiters.admit(key[0] if key else None, max_waiting)  # no await until it joins
    me = Waiter(types, flow is not None, key[0] if key else None)
    hints: WaitHints | None = None
    heard = 0
    left = asyncio.create_task(gone()) if gone is not None else None
    if left is not None:
        left.add_done_callback(lambda _: me.wake())
    watching = contextlib.nullcontext() if flow is None else flow.watching(me.wake)
    standing: Standing | None = None
    session: Session | None = None
    if key is not None:  # a revocation heard of wakes it to confirm its key
        session = Session(key[0], key[1], 0.0, on_revoke=me.wake, on_expire=me.wake)
        feed.register(session)

    async def withdrawn() -> list[T]:
        """Out of the standing line: the jobs an enqueue claimed for it meanwhile, if any."""
        nonlocal standing
        if standing is None:
            return []
        mine, standing = standing, None
        if mine.line.withdraw(mine):
            return []
        return cast(list[T], await mine.answer)

    try:
        with watching:
            shared = await waiters.join(me, feed)
            while True:
                me.woken = False
                took, me.called = me.called, None
                started = loop.time()
                if session is not None:
                    await session.confirm()
                jobs = await withdrawn() or await claim()
                shared.claimed(me, started, bool(jobs))
                if jobs:
                    if took is not None and all(job.type != took for job in jobs):
                        # It took others: the wake goes on (passed at its leave if back to it).
                        waiters.wake_one(took)
                    break
                if me.ended or loop.time() >= deadline:
                    break
                if flow is None:
                    hints = WaitHints()
                elif hints is None or hints.limited or heard != flow.changes:
                    heard = flow.changes  # a change since its hints: read them again
                    hints = await flow.wait_hints(types)
                    me.limited = hints.limited
                token_at = math.inf
                if hints.token_in is not None and shared.token_turn(me):
                    token_at = loop.time() + hints.token_in
                if offer is not None:
                    standing = offer()
                    standing.line.stand(standing)
                    standing.answer.add_done_callback(lambda _: me.wake())
                await shared.pause(me, every, min(deadline, token_at))
                if left is not None and left.done():
                    return []
        revoked = session is not None and session.revoked
        if jobs and (revoked or (left is not None and left.done())):
            if give_back is not None:
                await give_back(jobs)
            jobs = []
        if session is not None and session.revoked:
            raise KeyRevoked(f"the API key {session.name!r} was revoked")
        return jobs
    finally:
        waiters.leave(me)
        late = await withdrawn()  # claimed for it as it left: nobody will receive them
        if late and give_back is not None:
            await give_back(late)
        if left is not None:
            left.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await left


async def claim_for(
    service: JobService,
    feed: EventFeed,
    flow: JobTypeService,
    actor: Actor,
    claim: ClaimArgs,
    gone: Callable[[], Coroutine[object, object, object]] | None = None,
    key_live: Callable[[], Awaitable[bool]] | None = None,
) -> list[Job]:
    """A client's claim, the same over every API: `service.claim`, waiting as long as the
    service allows `claim.wait_seconds` when nothing is claimable, standing in line for
    enqueues meanwhile; what it claimed after its client went away (`gone`) is given back.
    With `key_live` (whether the caller's key is live now), a claim waiting when its key is
    revoked ends with KeyRevoked; a key's waiting claims are bounded by the settings."""
    seconds = service.claim_wait(claim.wait_seconds)
    types = validation.claim_types(claim.types, ["types"])
    lease, limit = claim.lease_seconds, claim.limit

    async def give_back(jobs: list[Job]) -> None:
        await service.release(actor, [j.id for j in jobs])

    return await claim_waiting(
        feed,
        lambda: service.claim(actor, types, lease, limit),
        service.usable_types(actor) if types is None else types,
        seconds,
        service.settings.claim_recheck_seconds,
        flow=flow,
        gone=gone,
        give_back=give_back,
        offer=lambda: service.standing_claim(actor, types, lease, limit),
        key=None if key_live is None else (actor.name, key_live),
        max_waiting=service.settings.max_waiting_claims_per_key,
    )
