"""A plain (sync) handler that outlives its timeout, against a live server on both backends:
its job is failed as timed out at once, but its thread, which nothing can stop, keeps its
slot until it returns, so the worker never runs more handlers than `concurrency`."""

from __future__ import annotations

import asyncio
import threading

from queuelog.client import AsyncClient, JobStatus
from queuelog.worker import RunningJob, Worker
from tests.support import LiveServer
from tests.workers.conftest import Keys
from tests.workers.helpers import settled, until, working


async def test_a_sync_handler_past_its_timeout_keeps_its_slot_until_it_returns(
    server: LiveServer, keys: Keys, job_type: str
) -> None:
    worker = Worker(server.url, keys.worker, concurrency=1, timeout=0.5)
    gate = threading.Event()
    lock = threading.Lock()
    entered: list[str] = []
    inside = 0
    peak = 0

    @worker.handler(job_type)
    def slow(job: RunningJob) -> str:
        nonlocal inside, peak
        with lock:
            entered.append(job.id)
            inside += 1
            peak = max(peak, inside)
        gate.wait(60)  # outlives the timeout until the test opens the gate
        with lock:
            inside -= 1
        return "done"

    async with AsyncClient(server.url, keys.producer) as producer:
        first = (await producer.enqueue(job_type, {"n": 1}, max_retries=0)).id
        second = (await producer.enqueue(job_type, {"n": 2}, max_retries=0)).id
    async with working(worker):
        # The first job is failed as timed out while its thread still runs...
        [failed] = await settled(server, [first])
        assert failed.status is JobStatus.FAILED
        assert failed.error == "TimeoutError: the handler ran over 0.5s"
        assert inside == 1
        # ...and the second waits: the slot is the first thread's until it returns.
        await asyncio.sleep(1.0)
        async with AsyncClient(server.url, server.admin_key) as admin:
            waiting = await admin.job(second)
        assert waiting is not None and waiting.status is JobStatus.PENDING
        assert entered == [first] and peak == 1
        gate.set()
        [done] = await settled(server, [second])
        await until(lambda: inside == 0)
    assert done.status is JobStatus.COMPLETED and done.result == "done"
    assert entered == [first, second] and peak == 1


async def test_a_job_retried_while_its_last_thread_runs_waits_for_that_thread(
    server: LiveServer, keys: Keys, job_type: str
) -> None:
    """Failed as timed out, the job is retried, and this worker (a slot free) claims it
    again: its handler starts only once the first attempt's thread has returned."""
    worker = Worker(server.url, keys.worker, concurrency=2, timeout=0.5)
    gate = threading.Event()
    lock = threading.Lock()
    entered: list[int] = []
    inside = 0
    peak = 0

    @worker.handler(job_type)
    def slow(job: RunningJob) -> str:
        nonlocal inside, peak
        with lock:
            entered.append(job.retry_count)
            inside += 1
            peak = max(peak, inside)
        gate.wait(60)
        with lock:
            inside -= 1
        return "done"

    async with AsyncClient(server.url, keys.producer) as producer:
        job_id = (await producer.enqueue(job_type, {}, max_retries=1)).id
    async with working(worker), AsyncClient(server.url, server.admin_key) as admin:
        # The retry is claimed again (RUNNING, retry 1) while the first thread still runs.
        await settled(
            server, [job_id], lambda j: j.status is JobStatus.RUNNING and j.retry_count == 1
        )
        await asyncio.sleep(1.0)
        assert entered == [0] and inside == 1
        held = await admin.job(job_id)
        assert held is not None and held.status is JobStatus.RUNNING  # heartbeated meanwhile
        gate.set()
        [done] = await settled(server, [job_id])
    assert done.status is JobStatus.COMPLETED and done.retry_count == 1
    assert entered == [0, 1] and peak == 1
