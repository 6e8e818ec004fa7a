"""`JobService.get_since`: the job a subscription event shows, read once for all its
subscribers, and never as it was before that event."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from queuelog.service.jobs import JobService
from queuelog.service.models import Actor, EnqueueRequest, Job, Role, Status
from queuelog.storage import jobs as jobs_sql

P1 = Actor("producer-1", Role.PRODUCER)
P2 = Actor("producer-2", Role.PRODUCER)
W1 = Actor("worker-1", Role.WORKER)
ADMIN = Actor("admin", Role.ADMIN)


class Reads:
    """Counts the service's reads of one job; `hold()` makes each read, once done, wait
    for `release()` before it returns (a read that began before a later change)."""

    def __init__(self, svc: JobService, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        self.done = asyncio.Event()
        self._gate: asyncio.Event | None = None
        real = svc.db.read

        async def read(fn: Callable[..., Any], *a: Any, **k: Any) -> Any:
            result = await real(fn, *a, **k)
            if fn is jobs_sql.get:
                self.count += 1
                self.done.set()
                if self._gate is not None:
                    await self._gate.wait()
            return result

        monkeypatch.setattr(svc.db, "read", read)

    async def until(self, n: int) -> None:
        """Wait (5 s at most) until `n` reads of the job are done."""
        async with asyncio.timeout(5):
            while self.count < n:
                self.done.clear()
                await self.done.wait()

    def hold(self) -> None:
        self._gate = asyncio.Event()

    def release(self) -> None:
        assert self._gate is not None
        self._gate.set()
        self._gate = None


async def _job_and_event(svc: JobService) -> tuple[Job, int]:
    job, _ = await svc.enqueue(P1, EnqueueRequest(type="email"))
    return job, (await svc.history(job.id, 10))[-1].id


async def _held(svc: JobService, monkeypatch: pytest.MonkeyPatch) -> tuple[Job, int, Reads]:
    """A job, its creation event, and the service's reads counted and held."""
    job, event = await _job_and_event(svc)
    reads = Reads(svc, monkeypatch)
    reads.hold()
    return job, event, reads


async def test_every_subscriber_of_one_change_shares_one_read(
    svc: JobService, monkeypatch: pytest.MonkeyPatch
) -> None:
    job, event = await _job_and_event(svc)
    reads = Reads(svc, monkeypatch)
    viewers = [ADMIN, P1, P2, W1] * 250
    got = await asyncio.gather(*(svc.get_since(v, job.id, event) for v in viewers))
    assert reads.count == 1
    # Each still sees only what it may: the producer and the admin, not the others.
    for viewer, seen in zip(viewers, got, strict=True):
        if viewer in (ADMIN, P1):
            assert seen is not None and seen.id == job.id and seen.status is Status.PENDING
        else:
            assert seen is None
    # Once that read is over, the next change's subscribers read afresh.
    await svc.get_since(ADMIN, job.id, event)
    assert reads.count == 2


async def test_a_read_begun_before_a_change_is_not_shown_with_it(
    svc: JobService, monkeypatch: pytest.MonkeyPatch
) -> None:
    job, enqueued, reads = await _held(svc, monkeypatch)
    early = asyncio.create_task(svc.get_since(ADMIN, job.id, enqueued))
    await reads.until(1)  # it has read the job as PENDING, and not yet returned
    (claimed,) = await svc.claim(W1, ["email"], None)
    running = (await svc.history(job.id, 10))[-1].id
    assert claimed.id == job.id and running > enqueued
    later = asyncio.create_task(svc.get_since(ADMIN, job.id, running))
    await reads.until(2)  # it reads again: the early read is not shared
    # A caller with the older event joins the newest read in flight: newer is fine.
    same = asyncio.create_task(svc.get_since(P1, job.id, enqueued))
    await asyncio.sleep(0.01)
    reads.release()
    got = await asyncio.gather(early, later, same)
    assert [j.status if j else None for j in got] == [
        Status.PENDING,
        Status.RUNNING,
        Status.RUNNING,
    ]
    assert reads.count == 2


async def test_one_subscriber_leaving_does_not_cancel_the_others_read(
    svc: JobService, monkeypatch: pytest.MonkeyPatch
) -> None:
    job, event, reads = await _held(svc, monkeypatch)
    leaving = asyncio.create_task(svc.get_since(ADMIN, job.id, event))
    staying = asyncio.create_task(svc.get_since(P1, job.id, event))
    await reads.until(1)
    leaving.cancel()
    reads.release()
    seen = await staying
    assert seen is not None and seen.id == job.id
    assert leaving.cancelled() and reads.count == 1


async def test_a_failed_read_fails_its_sharers_and_the_next_reads_afresh(
    svc: JobService, monkeypatch: pytest.MonkeyPatch
) -> None:
    job, event = await _job_and_event(svc)
    real = svc.db.read
    failures = [RuntimeError("database away")]

    async def read(fn: Callable[..., Any], *a: Any, **k: Any) -> Any:
        if fn is jobs_sql.get and failures:
            await asyncio.sleep(0.01)
            raise failures.pop()
        return await real(fn, *a, **k)

    monkeypatch.setattr(svc.db, "read", read)
    got = await asyncio.gather(
        *(svc.get_since(ADMIN, job.id, event) for _ in range(3)), return_exceptions=True
    )
    assert [str(g) for g in got] == ["database away"] * 3
    again = await svc.get_since(ADMIN, job.id, event)
    assert again is not None and again.id == job.id


async def test_a_job_gone_since_is_none(svc: JobService) -> None:
    _, event = await _job_and_event(svc)
    assert await svc.get_since(ADMIN, 10**9, event) is None
