"""One status change fanned out to hundreds of subscribers that show the job: the server
reads the job once for them all, and each is shown the job as of its event or newer.

In-process server (`inprocess.live`) so that the reads can be counted; real WebSocket
clients."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import pytest

from queuelog.service.models import Actor, EnqueueRequest, Role
from queuelog.services import Services
from queuelog.storage import jobs as jobs_sql
from tests.subscriptions.inprocess import until
from tests.subscriptions.wsclient import WS, ws
from tests.support import LiveServer

CONNECTIONS, PER_CONNECTION = 10, 30  # 300 subscriptions
SHOWING_THE_JOB = """subscription($type: String) {
  jobStatusChanged(type: $type) { cursor status job { id status } }
}"""
ORDER = {"PENDING": 0, "RUNNING": 1, "COMPLETED": 2}
PRODUCER = Actor("p", Role.PRODUCER)
WORKER = Actor("w", Role.WORKER)


async def test_one_change_to_many_subscribers_reads_the_job_once(
    live: tuple[LiveServer, str], services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, key = live
    reads: list[int] = []
    real = services.db.read

    async def read(fn: Callable[..., Any], *a: Any, **k: Any) -> Any:
        if fn is jobs_sql.get:
            reads.append(a[0])
        return await real(fn, *a, **k)

    monkeypatch.setattr(services.db, "read", read)
    svc = services.service
    async with AsyncExitStack() as stack:
        clients: list[WS] = [
            await stack.enter_async_context(ws(server, key)) for _ in range(CONNECTIONS)
        ]
        for client in clients:
            for _ in range(PER_CONNECTION):
                await client.subscribe({"type": "email"}, SHOWING_THE_JOB)
        await until(lambda: services.feed.followers == CONNECTIONS * PER_CONNECTION)

        job, _ = await svc.enqueue(PRODUCER, EnqueueRequest("email"))
        (claimed,) = await svc.claim(WORKER, ["email"], None)
        await svc.complete(WORKER, job.id, None)
        assert claimed.id == job.id

        for client in clients:
            for message in await client.take(3 * PER_CONNECTION):
                assert message["type"] == "next" and "errors" not in message["payload"], message
                event = message["payload"]["data"]["jobStatusChanged"]
                assert event["job"]["id"] == str(job.id)
                # The job as of its event, or newer: never from before it.
                assert ORDER[event["job"]["status"]] >= ORDER[event["status"]], event

    # 900 deliveries of three changes; without sharing, 900 reads.
    assert reads and set(reads) == {job.id}
    assert len(reads) <= 3 * 3, len(reads)
