"""`queuelog.worker.Worker` in the test's process against a live server, on both backends."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from queuelog.client import AsyncClient, JobStatus
from queuelog.worker import PermanentError, RunningJob, Worker
from tests.support import LiveServer
from tests.workers.conftest import Keys
from tests.workers.helpers import history, settled, until, working

ONCE = [(None, "PENDING"), ("PENDING", "RUNNING"), ("RUNNING", "COMPLETED")]


async def enqueue(
    server: LiveServer, key: str, job_type: str, *payloads: dict[str, Any], **kw: Any
) -> list[str]:
    async with AsyncClient(server.url, key) as client:
        return [(await client.enqueue(job_type, p, **kw)).id for p in payloads]


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_handlers_results_retries_and_permanent_failures(
    server: LiveServer, keys: Keys, job_type: str, kind: str
) -> None:
    worker = Worker(server.url, keys.worker, concurrency=4)
    threads: set[str] = set()

    def work(job: RunningJob) -> Any:
        threads.add(threading.current_thread().name)
        if job.payload.get("fail") == "permanent":
            raise PermanentError("the address is invalid")
        if job.payload.get("fail"):
            raise ValueError(f"attempt {job.retry_count}")
        return {"n": job.payload["n"], "type": job.type, "id": job.id}

    if kind == "sync":
        worker.handler(job_type)(work)
    else:

        @worker.handler(job_type)
        async def handle(job: RunningJob) -> Any:
            return work(job)

    ok = await enqueue(server, keys.producer, job_type, *({"n": i} for i in range(5)))
    retried = await enqueue(server, keys.producer, job_type, {"fail": "yes"}, max_retries=1)
    permanent = await enqueue(server, keys.producer, job_type, {"fail": "permanent"})
    async with working(worker):
        jobs = await settled(server, ok + retried + permanent)
    by_id = {j.id: j for j in jobs}
    for i, job_id in enumerate(ok):
        assert by_id[job_id].status is JobStatus.COMPLETED
        assert by_id[job_id].result == {"n": i, "type": job_type, "id": job_id}
    again = by_id[retried[0]]
    assert (again.status, again.retry_count, again.error) == (
        JobStatus.FAILED, 1, "ValueError: attempt 1")  # fmt: skip
    final = by_id[permanent[0]]
    assert (final.status, final.retry_count) == (JobStatus.FAILED, 0)
    assert final.error == "PermanentError: the address is invalid"
    assert all(h == ONCE for h in history(server, ok).values())
    main = threading.main_thread().name
    assert (main in threads) == (kind == "async")


async def test_a_handler_that_outlives_its_timeout_is_failed(
    server: LiveServer, keys: Keys, job_type: str
) -> None:
    worker = Worker(server.url, keys.worker)
    stopped = asyncio.Event()

    @worker.handler(job_type, timeout=0.3)
    async def slow(job: RunningJob) -> None:
        try:
            await asyncio.sleep(60)
        finally:
            stopped.set()

    job_ids = await enqueue(server, keys.producer, job_type, {}, max_retries=0)
    async with working(worker):
        [job] = await settled(server, job_ids)
    assert job.status is JobStatus.FAILED and stopped.is_set()
    assert job.error == "TimeoutError: the handler ran over 0.3s"


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_cancelling_a_running_job_stops_its_handler(
    server: LiveServer, keys: Keys, job_type: str, kind: str
) -> None:
    # A short lease: heartbeats (which carry the cancel to the worker) every second.
    worker = Worker(server.url, keys.worker, lease_seconds=3)
    started, stopped = threading.Event(), threading.Event()
    if kind == "async":

        @worker.handler(job_type)
        async def wait_async(job: RunningJob) -> None:
            started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                stopped.set()
                raise

    else:

        @worker.handler(job_type)
        def wait_sync(job: RunningJob) -> None:
            started.set()
            if job.wait_cancelled(60):
                stopped.set()
            job.raise_if_cancelled()

    job_ids = await enqueue(server, keys.producer, job_type, {})
    async with working(worker):
        await until(started.is_set)
        async with AsyncClient(server.url, keys.producer) as producer:
            await producer.cancel(job_ids[0])
        await until(stopped.is_set)
    [job] = await settled(server, job_ids)
    assert job.status is JobStatus.CANCELLED
    assert history(server, job_ids)[job_ids[0]][-1] == ("RUNNING", "CANCELLED")


async def test_stop_lets_running_handlers_finish_then_fails_the_rest(
    server: LiveServer, keys: Keys, job_type: str
) -> None:
    worker = Worker(server.url, keys.worker, concurrency=4, grace_seconds=1.0)
    running: set[str] = set()

    @worker.handler(job_type)
    async def handle(job: RunningJob) -> str:
        running.add(job.id)
        await asyncio.sleep(job.payload["sleep"])
        return "done"

    quick = await enqueue(server, keys.producer, job_type, {"sleep": 0.3})
    slow = await enqueue(server, keys.producer, job_type, {"sleep": 60})
    task = asyncio.create_task(worker.serve())
    await until(lambda: len(running) == 2)
    began = time.monotonic()
    worker.stop()
    await asyncio.wait_for(task, 30)
    assert time.monotonic() - began < 10
    done, failed = await settled(server, quick + slow, lambda j: j.status != JobStatus.RUNNING)
    assert (done.status, done.result) == (JobStatus.COMPLETED, "done")
    assert (failed.status, failed.retry_count) == (JobStatus.PENDING, 1)
    admin_view = await settled(server, slow, lambda j: True)
    assert admin_view[0].error is not None and admin_view[0].error.startswith("WorkerStopped")


async def test_reports_are_retried_across_a_server_restart(own_server: LiveServer) -> None:
    server = own_server
    producer = server.create_key("PRODUCER", ["email"])
    worker = Worker(server.url, server.create_key("WORKER", ["email"]), lease_seconds=60)
    release = threading.Event()
    started = threading.Event()

    @worker.handler("email")
    def handle(job: RunningJob) -> dict[str, bool]:
        started.set()
        release.wait(60)
        return {"ok": True}

    job_ids = await enqueue(server, producer, "email", {}, {})
    async with working(worker):
        await until(started.is_set)
        server.stop()
        release.set()  # the handler ends while the server is down: its report must wait
        await asyncio.sleep(0.5)
        server.start()
        jobs = await settled(server, job_ids)
    assert [j.status for j in jobs] == [JobStatus.COMPLETED, JobStatus.COMPLETED]
    assert all(h == ONCE for h in history(server, job_ids).values())
