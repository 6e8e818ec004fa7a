"""A job whose failure rides with the claim for its freed place, and that the same claim
takes back (its retry is due at once), runs again in this worker: it is not mistaken for a
faulty server's repeat of a job the worker still holds, and left to its lease."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from queuelog.client import AsyncClient, JobStatus
from queuelog.worker import RunningJob, Worker
from tests.support import LiveServer
from tests.workers.helpers import settled, working


async def test_a_failure_carried_by_the_claim_that_takes_the_job_back_runs_again(
    start_server: Callable[..., LiveServer], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "queuelog.worker")
    server = start_server(backoff_base_seconds=0)  # a retry is due at once
    producer = server.create_key("PRODUCER", ["email"])
    worker_key = server.create_key("WORKER", ["email"])
    worker = Worker(server.url, worker_key, concurrency=1, prefetch=0, lease_seconds=5)
    attempts: list[int] = []

    @worker.handler("email")
    async def flaky(job: RunningJob) -> Any:
        attempts.append(job.retry_count)
        if job.retry_count == 0:
            raise ValueError("first attempt")
        return "ok"

    async with AsyncClient(server.url, producer) as client:
        job_id = (await client.enqueue("email", {}, max_retries=1)).id
    async with working(worker):
        [job] = await settled(server, [job_id])
    assert (job.status, job.retry_count, job.result) == (JobStatus.COMPLETED, 1, "ok")
    assert attempts == [0, 1]
    assert not [m for m in caplog.messages if "while this worker holds it" in m]
