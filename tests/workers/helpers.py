"""Shared by the worker tests: run a Worker in the test's loop, wait for jobs to settle."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from queuelog.client import AsyncClient, Job
from queuelog.worker import Worker
from tests.support import LiveServer


@asynccontextmanager
async def working(worker: Worker) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(worker.serve())
    try:
        yield task
    finally:
        worker.stop()
        await asyncio.wait_for(task, 60)


async def settled(
    server: LiveServer, job_ids: list[str], done: Callable[[Job], bool] | None = None
) -> list[Job]:
    """The jobs once every one is in a terminal status (or satisfies `done`), read as admin."""
    check = done or (lambda j: j.status.terminal)
    async with AsyncClient(server.url, server.admin_key) as admin:
        for _ in range(1200):
            jobs = [await admin.job(i) for i in job_ids]
            if all(j is not None and check(j) for j in jobs):
                return [j for j in jobs if j is not None]
            await asyncio.sleep(0.05)
    raise AssertionError(f"jobs did not settle: {jobs}")


def history(server: LiveServer, job_ids: list[str]) -> dict[str, list[tuple[Any, str]]]:
    """Each job's status changes as (previous, status), oldest first."""
    query = """query($id: ID!) { job(id: $id) { events { previousStatus status } } }"""
    out = {}
    for job_id in job_ids:
        events = server.gql(query, {"id": job_id}, server.admin_key)["job"]["events"]
        out[job_id] = [(e["previousStatus"], e["status"]) for e in events]
    return out


async def until(condition: Callable[[], bool], seconds: float = 30) -> None:
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out")
