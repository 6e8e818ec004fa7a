"""Concurrent enqueues queued while the writers are busy share one INSERT (`write_rows`),
each caller gets its own job back, and if the shared statement fails each runs alone."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from queuelog.runtime import Services
from queuelog.service.models import Actor, EnqueueRequest, Job
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.tx import Tx

CALLERS = 10


async def _while_writers_are_busy(
    services: Services, start: Callable[[], list[Awaitable[Any]]]
) -> list[Any]:
    """Occupy every writer thread, queue what `start` starts, then let the writers go: the
    queued writes then meet in the next transaction."""
    db = services.db
    release, started = threading.Event(), threading.Semaphore(0)

    def hold(tx: Tx) -> None:
        started.release()
        release.wait(30)

    holders = []
    for _ in db.writer_threads:  # one at a time, so that each lands in its own thread
        holders.append(asyncio.ensure_future(db.write(hold)))
        assert await asyncio.to_thread(started.acquire, timeout=10)
    tasks = [asyncio.ensure_future(a) for a in start()]
    for _ in range(5):  # each task runs up to its queued write
        await asyncio.sleep(0)
    release.set()
    await asyncio.gather(*holders)
    return await asyncio.gather(*tasks)


def _enqueues(services: Services, producer: Actor) -> Callable[[], list[Awaitable[Any]]]:
    svc = services.service
    return lambda: [
        svc.enqueue(producer, EnqueueRequest("email", payload={"i": i})) for i in range(CALLERS)
    ]


def _count_inserts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of rows of each `jobs_sql.insert` from now on."""
    calls: list[int] = []
    real = jobs_sql.insert

    def counted(tx: Tx, values: Any) -> Any:
        calls.append(len(values))
        return real(tx, values)

    monkeypatch.setattr(jobs_sql, "insert", counted)
    return calls


async def test_enqueues_queued_together_share_one_insert(
    services: Services, producer: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count_inserts(monkeypatch)
    results = await _while_writers_are_busy(services, _enqueues(services, producer))
    assert calls == [CALLERS]
    jobs: list[Job] = [job for job, created in results if created]
    assert [j.payload for j in jobs] == [{"i": i} for i in range(CALLERS)]
    assert [j.id for j in jobs] == sorted(j.id for j in jobs)  # queue order
    for job in jobs:  # each one stored, with its creation event
        assert (await services.service.get(producer, job.id)) == job
        assert [e.status.value for e in await services.service.history(job.id, 10)] == ["pending"]


async def test_a_failing_shared_insert_runs_each_caller_alone(
    services: Services, producer: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = jobs_sql.insert

    def fails_when_shared(tx: Tx, values: Any) -> Any:
        calls.append(len(values))
        if len(values) > 1:
            raise RuntimeError("the shared statement failed")
        return real(tx, values)

    monkeypatch.setattr(jobs_sql, "insert", fails_when_shared)
    results = await _while_writers_are_busy(services, _enqueues(services, producer))
    assert calls == [CALLERS] + [1] * CALLERS
    assert [job.payload for job, _ in results] == [{"i": i} for i in range(CALLERS)]
    assert len({job.id for job, _ in results}) == CALLERS


async def test_batches_without_keys_queued_together_share_one_insert(
    services: Services, producer: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Concurrent enqueueJobs batches (and single enqueues) queued meanwhile become one
    INSERT; each caller gets its own jobs, in its order."""
    calls = _count_inserts(monkeypatch)
    svc = services.service

    def start() -> list[Awaitable[Any]]:
        batches: list[Awaitable[Any]] = [
            svc.enqueue_many(
                producer, [EnqueueRequest("email", payload={"b": b, "i": i}) for i in range(5)]
            )
            for b in range(4)
        ]
        return [*batches, svc.enqueue(producer, EnqueueRequest("email", payload={"single": 1}))]

    *batches, (single, _) = await _while_writers_are_busy(services, start)
    assert calls == [4 * 5 + 1]
    for b, jobs in enumerate(batches):
        assert [j.payload for j in jobs] == [{"b": b, "i": i} for i in range(5)]
    assert single.payload == {"single": 1}
    ids = [j.id for jobs in batches for j in jobs] + [single.id]
    assert ids == sorted(ids) and len(set(ids)) == 21
