"""A worker whose handlers are quick claims jobs ahead of its free slots; slow handlers get
none ahead; a job cancelled while it waits for a slot never starts. Through a live server,
on both backends."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from queuelog.client import AsyncClient, JobStatus
from queuelog.worker import RunningJob, Worker
from tests.support import LiveServer
from tests.workers.conftest import Keys
from tests.workers.helpers import settled, until, working


class Handler:
    """Quick jobs return at once; a {"block": true} job waits for `release`; a
    {"sleep": s} job sleeps. Counts the handlers running at once."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started: list[str] = []
        self.running = 0
        self.most_at_once = 0

    async def run(self, job: RunningJob) -> Any:
        self.started.append(job.id)
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            if job.payload.get("block"):
                await self.release.wait()
            await asyncio.sleep(job.payload.get("sleep", 0))
            return job.payload
        finally:
            self.running -= 1


async def enqueue(
    server: LiveServer, keys: Keys, job_type: str, *payloads: dict[str, Any]
) -> list[str]:
    async with AsyncClient(server.url, keys.producer) as producer:
        return [(await producer.enqueue(job_type, p)).id for p in payloads]


async def statuses(server: LiveServer, job_ids: list[str]) -> list[JobStatus]:
    async with AsyncClient(server.url, server.admin_key) as admin:
        jobs = [await admin.job(i) for i in job_ids]
    return [j.status for j in jobs if j is not None]


def one_slot_worker(
    server: LiveServer, keys: Keys, job_type: str, **kw: Any
) -> tuple[Worker, Handler]:
    """A worker of concurrency 1 that claims up to 3 jobs ahead, and its handler."""
    worker = Worker(server.url, keys.worker, concurrency=1, **{"prefetch": 3, **kw})
    handler = Handler()
    worker.handler(job_type)(handler.run)
    return worker, handler


async def until_held(server: LiveServer, job_ids: list[str], n: int) -> list[JobStatus]:
    """The jobs' statuses once `n` of them are RUNNING (or after five seconds)."""
    for _ in range(100):
        if (found := await statuses(server, job_ids)).count(JobStatus.RUNNING) == n:
            return found
        await asyncio.sleep(0.05)
    return found


async def hold_behind_a_blocked_job(
    server: LiveServer, keys: Keys, job_type: str, handler: Handler, warm: list[dict[str, Any]]
) -> tuple[list[str], list[str]]:
    """Run the `warm` jobs to the end (they set the handlers' average), then enqueue a
    blocking job and four quick ones: (the blocking job's id, the quick ones' ids)."""
    await settled(server, await enqueue(server, keys, job_type, *warm))
    blocked = await enqueue(server, keys, job_type, {"block": True})
    await until(lambda: blocked[0] in handler.started)
    quick = await enqueue(server, keys, job_type, *({"n": i} for i in range(4)))
    return blocked, quick


@pytest.mark.parametrize("prefetch", [3, 0])
async def test_quick_handlers_get_jobs_claimed_ahead_of_their_slots(
    server: LiveServer, keys: Keys, job_type: str, prefetch: int
) -> None:
    worker, handler = one_slot_worker(server, keys, job_type, prefetch=prefetch, wait_seconds=1)
    async with working(worker):
        blocked, quick = await hold_behind_a_blocked_job(
            server, keys, job_type, handler, [{"n": -i} for i in range(1, 4)]
        )
        # Held: the blocked job and up to `prefetch` more, none of which has started.
        await until_held(server, quick, prefetch)
        await asyncio.sleep(0.3)  # no more than that is ever held
        held = await statuses(server, quick)
        assert held.count(JobStatus.RUNNING) == prefetch
        assert held.count(JobStatus.PENDING) == 4 - prefetch
        assert set(handler.started).isdisjoint(quick)
        handler.release.set()
        jobs = await settled(server, blocked + quick)
    assert all(j.status is JobStatus.COMPLETED for j in jobs)
    assert handler.most_at_once == 1
    # The jobs held ahead ran in the order they were claimed.
    assert [i for i in handler.started if i in quick] == quick


async def test_slow_handlers_get_no_jobs_ahead(
    server: LiveServer, keys: Keys, job_type: str
) -> None:
    worker, handler = one_slot_worker(server, keys, job_type, wait_seconds=1)
    async with working(worker):
        warm: list[dict[str, Any]] = [
            {"n": -1},
            {"sleep": 0.3},
        ]  # one quick, then one slow: slow on average
        blocked, quick = await hold_behind_a_blocked_job(server, keys, job_type, handler, warm)
        await asyncio.sleep(0.5)
        assert (await statuses(server, quick)).count(JobStatus.PENDING) == 4
        handler.release.set()
        await settled(server, blocked + quick)


async def test_a_job_cancelled_while_it_waits_for_a_slot_never_starts(
    server: LiveServer, keys: Keys, job_type: str
) -> None:
    # A short lease: heartbeats (which carry the cancel to the worker) every second.
    worker, handler = one_slot_worker(server, keys, job_type, lease_seconds=3)
    async with working(worker):
        blocked, quick = await hold_behind_a_blocked_job(
            server, keys, job_type, handler, [{"n": -1}, {"n": -2}]
        )
        found = await until_held(server, quick, 3)
        held = [i for i, s in zip(quick, found, strict=True) if s is JobStatus.RUNNING]
        async with AsyncClient(server.url, keys.producer) as producer:
            await producer.cancel(held[0])
        await asyncio.sleep(2.5)  # more than two heartbeats: the worker has heard
        handler.release.set()
        jobs = await settled(server, blocked + quick)
    assert held[0] not in handler.started
    by_id = {j.id: j.status for j in jobs}
    assert by_id.pop(held[0]) is JobStatus.CANCELLED
    assert set(by_id.values()) == {JobStatus.COMPLETED}


def test_prefetch_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="prefetch"):
        Worker("http://127.0.0.1:1/graphql", "k", prefetch=-1)
    # Enough for two requests of 15 reports each, and at least three times concurrency.
    worker = Worker("http://127.0.0.1:1/graphql", "k", concurrency=4)
    assert worker.prefetch == 26
    worker.concurrency = 16  # as `queuelog worker --concurrency 16` does
    assert worker.prefetch == 48
    worker.prefetch = 0
    assert worker.prefetch == 0


async def test_quick_jobs_go_many_to_a_request(
    server: LiveServer, keys: Keys, job_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claiming ahead, a claim waits for as many free places as one request carries
    reports, and a second claim goes while the first is on its way: quick jobs cost a
    fraction of a request each, even at concurrency 2."""
    requests = claiming = most_claiming = 0
    for name in ("claim", "report", "report_and_claim"):
        sent = getattr(AsyncClient, name)

        async def counted(*args: Any, _sent: Any = sent, _name: str = name, **kw: Any) -> Any:
            nonlocal requests, claiming, most_claiming
            requests += 1
            claims = _name != "report"
            claiming += claims
            most_claiming = max(most_claiming, claiming)
            try:
                return await _sent(*args, **kw)
            finally:
                claiming -= claims

        monkeypatch.setattr(AsyncClient, name, counted)
    n = 300
    worker = Worker(server.url, keys.worker, concurrency=2, wait_seconds=1)
    worker.handler(job_type)(Handler().run)
    async with AsyncClient(server.url, keys.producer) as producer:
        ids = [j.id for j in await producer.enqueue_many([{"type": job_type}] * n)]
    async with working(worker):
        jobs = await settled(server, ids)
    assert {j.status for j in jobs} == {JobStatus.COMPLETED}
    # Two requests a place at concurrency 2 without claiming ahead: n of them.
    assert requests <= n / 5, requests
    assert most_claiming == 2
