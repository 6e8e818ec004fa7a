"""The feed in-process, on both backends: bounded memory, slow followers, the retention
watermark, cursors never reused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import sqlalchemy as sa

from queuelog.config import Settings
from queuelog.events.feed import CursorExpired, EventFeed, Interest
from queuelog.runtime import Services, open_services
from queuelog.service.jobs import JobService
from queuelog.service.models import Actor, EnqueueRequest, JobEvent, Priority, Role
from queuelog.service.retention import prune

PRODUCER = Actor("p1", Role.PRODUCER)
WORKER = Actor("w1", Role.WORKER)
ADMIN = Interest(Actor("admin", Role.ADMIN, max_priority=Priority.CRITICAL))


@pytest.fixture
async def feed(services: Services) -> AsyncIterator[EventFeed]:
    feed = EventFeed(services.db, window=5, poll_interval=0.05)
    await feed.start()
    yield feed
    await feed.stop()


async def take(it: AsyncIterator[JobEvent], n: int) -> list[JobEvent]:
    return [await anext(it) for _ in range(n)]


async def test_a_slow_follower_holds_no_memory_and_misses_nothing(
    services: Services, feed: EventFeed
) -> None:
    svc = services.service
    slow = feed.follow(feed.head, ADMIN)
    fast = feed.follow(feed.head, ADMIN)
    ids = [(await svc.enqueue(PRODUCER, EnqueueRequest("email")))[0].id for _ in range(40)]

    # The fast follower gets everything while the slow one reads nothing ...
    assert [e.job_id for e in await take(fast, 40)] == ids
    # ... and the feed holds a bounded window, not a queue per follower.
    assert feed.held <= 10
    # The slow one, its cursor long out of the window, reads the table: nothing lost.
    events = await take(slow, 40)
    assert [e.job_id for e in events] == ids
    assert [e.id for e in events] == sorted({e.id for e in events})
    await fast.aclose()
    await slow.aclose()


async def test_the_reader_reads_nothing_while_nobody_follows(
    services: Services, feed: EventFeed, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, reads = services.service, []
    real = services.db.read

    async def counted(fn: Any, *a: Any, **k: Any) -> Any:
        reads.append(fn)
        return await real(fn, *a, **k)

    monkeypatch.setattr(services.db, "read", counted)
    wakes = 0
    wake = feed._wake.set

    def counted_wake() -> None:
        nonlocal wakes
        wakes += 1
        wake()

    # Until its first poll the reader does not know it is alone: a commit, or the listener
    # connecting, may wake it then. From then on nothing wakes it.
    for _ in range(1_000):
        if feed._behind:
            break
        await asyncio.sleep(0.01)
    assert feed._behind
    monkeypatch.setattr(feed._wake, "set", counted_wake)
    for _ in range(5):
        await svc.enqueue(PRODUCER, EnqueueRequest("email"))
    await asyncio.sleep(0.3)  # six poll intervals, five commits, their NOTIFYs
    assert reads == []
    assert wakes == 0
    # A follower from now on gets what comes next, none of what came before.
    live = feed.follow(None, ADMIN)
    first = asyncio.ensure_future(anext(live))
    for _ in range(1_000):  # until the follower has taken its place
        if feed.followers:
            break
        await asyncio.sleep(0.01)
    new, _ = await svc.enqueue(PRODUCER, EnqueueRequest("pdf"))
    assert (await asyncio.wait_for(first, 10)).job_id == new.id
    await live.aclose()


async def test_a_cursor_below_pruned_events_is_expired_not_a_silent_gap(
    services: Services, feed: EventFeed
) -> None:
    svc = services.service
    marker, _ = await svc.enqueue(PRODUCER, EnqueueRequest("email"))
    before = (await svc.history(marker.id, 10))[-1].id
    job, _ = await svc.enqueue(PRODUCER, EnqueueRequest("sync"))
    (claimed,) = await svc.claim(WORKER, ["sync"], None)
    assert claimed.id == job.id
    await svc.complete(WORKER, job.id, None)
    last = (await svc.history(job.id, 10))[-1].id

    keep_nothing = services.settings.model_copy(update={"retention_completed_days": 0})
    assert (await prune(JobService(services.db, keep_nothing)))["completed"] == 1

    with pytest.raises(CursorExpired):
        await feed.check_cursor(before)  # as a subscription with `after` starts
    # A follower already under way hears it on its next read.
    stale = feed.follow(before, ADMIN)
    with pytest.raises(CursorExpired):
        await anext(stale)
    await stale.aclose()

    # From the newest pruned event on, nothing is missing: the feed goes on.
    fresh = feed.follow(last, ADMIN)
    new, _ = await svc.enqueue(PRODUCER, EnqueueRequest("pdf"))
    (event,) = await take(fresh, 1)
    assert event.job_id == new.id
    # The pruned events' ids are never handed out again (they are cursors).
    assert event.id > last
    await fresh.aclose()


async def test_followers_see_only_what_they_may_read(services: Services, feed: EventFeed) -> None:
    svc = services.service
    other = Actor("p2", Role.PRODUCER)
    mine = feed.follow(feed.head, Interest(PRODUCER))
    held = feed.follow(feed.head, Interest(WORKER, statuses=None))
    theirs, _ = await svc.enqueue(other, EnqueueRequest("email"))
    own, _ = await svc.enqueue(PRODUCER, EnqueueRequest("email"))
    (claimed,) = await svc.claim(WORKER, ["email"], None)
    await svc.complete(WORKER, claimed.id, None)
    assert claimed.id == theirs.id

    assert [(e.job_id, e.status.value) for e in await take(mine, 1)] == [(own.id, "pending")]
    assert [(e.job_id, e.status.value) for e in await take(held, 2)] == [
        (theirs.id, "running"),
        (theirs.id, "completed"),
    ]
    await mine.aclose()
    await held.aclose()


async def test_postgres_notify_wakes_the_reader_for_another_process_s_commit(
    services: Services, settings: Settings
) -> None:
    await _notify_wakes_the_feed(services, settings)


async def _notify_wakes_the_feed(
    services: Services, settings: Settings, meanwhile: Callable[[], Awaitable[None]] | None = None
) -> None:
    """A feed that never polls hears of another process's commit (after `meanwhile`)."""
    if services.db.dialect != "postgresql":
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    feed = EventFeed(services.db, poll_interval=3600)  # no polling: only NOTIFY wakes it
    await feed.start()
    elsewhere = open_services(settings)  # its commits do not call this feed's hook
    try:
        if meanwhile is not None:
            await meanwhile()
        follower = feed.follow(feed.head, ADMIN)
        job, _ = await elsewhere.service.enqueue(PRODUCER, EnqueueRequest("email"))
        async with asyncio.timeout(30):
            (event,) = await take(follower, 1)
        assert event.job_id == job.id
        await follower.aclose()
    finally:
        elsewhere.db.close()
        await feed.stop()


async def _new_listen_backend(services: Services, known: set[int]) -> set[int]:
    """The LISTEN connections open, once one not in `known` is."""

    def read(tx: Any) -> set[int]:
        rows = tx.conn.execute(
            sa.text(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND starts_with(query, 'LISTEN') AND pid <> pg_backend_pid()"
            )
        )
        return {pid for (pid,) in rows}

    async with asyncio.timeout(30):
        while True:
            pids = await services.db.read(read)
            if pids - known:
                return pids
            await asyncio.sleep(0.05)


async def test_postgres_listener_reconnects_after_its_connection_is_cut(
    services: Services, settings: Settings
) -> None:
    async def cut_the_listener() -> None:
        before = await _new_listen_backend(services, set())
        cut = sa.text("SELECT pg_terminate_backend(pid) FROM unnest(:pids) AS t(pid)")
        await services.db.read(lambda tx: tx.conn.execute(cut, {"pids": sorted(before)}).all())
        await _new_listen_backend(services, before)  # after the listener's retry delay

    await _notify_wakes_the_feed(services, settings, cut_the_listener)
