"""A worker whose server fails some requests (INTERNAL_SERVER_ERROR in a GraphQL answer,
HTTP 500, TRY_AGAIN) backs off and carries on: it neither exits nor abandons the jobs it
holds, and each job is reported once. A claim refused for good (a revoked key) stops the
worker, after it has run and reported the jobs it held. Live servers on both backends;
the failures are put in the worker's HTTP transport, between it and the server."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import orjson
import pytest

from queuelog.client import AsyncClient, QueuelogError
from queuelog.worker import RunningJob, Worker
from queuelog.worker import worker as worker_module
from tests.support import LiveServer
from tests.workers.conftest import Keys
from tests.workers.helpers import history, settled, until, working

ONCE = [(None, "PENDING"), ("PENDING", "RUNNING"), ("RUNNING", "COMPLETED")]


def _graphql_error(code: str) -> httpx.Response:
    body = {"data": None, "errors": [{"message": "failed", "extensions": {"code": code}}]}
    return httpx.Response(200, content=orjson.dumps(body))


class Flaky(httpx.AsyncBaseTransport):
    """Forwards to the server, except the requests `plan` names: for the nth claim (a
    request with `claimJobs`) or report (one with a report and no claim), a stand-in answer
    without asking the server, or ("after", answer): the server's answer lost and replaced
    after it took the request."""

    def __init__(self, plan: dict[tuple[str, int], Any]) -> None:
        self.real = httpx.AsyncHTTPTransport()
        self.plan = plan
        self.seen = {"claim": 0, "report": 0}
        self.injected = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = request.content
        kind = (
            "claim"
            if b"claimJobs" in body
            else "report"
            if b"Job(id:" in body or b"reportJobs" in body
            else None
        )
        planned = None
        if kind is not None:
            self.seen[kind] += 1
            planned = self.plan.get((kind, self.seen[kind]))
        if planned is None:
            return await self.real.handle_async_request(request)
        self.injected += 1
        if isinstance(planned, tuple):
            await (await self.real.handle_async_request(request)).aread()
            planned = planned[1]
        assert isinstance(planned, httpx.Response)
        return planned

    async def aclose(self) -> None:
        await self.real.aclose()


def through(monkeypatch: pytest.MonkeyPatch, transport: Flaky) -> None:
    """Have the worker's client send its requests through `transport`."""

    class Client(AsyncClient):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            self._http = httpx.AsyncClient(
                headers=self._http.headers, timeout=self._http.timeout, transport=transport
            )

    monkeypatch.setattr(worker_module, "AsyncClient", Client)


async def enqueue(server: LiveServer, key: str, job_type: str, n: int) -> list[str]:
    async with AsyncClient(server.url, key) as client:
        jobs = await client.enqueue_many(
            [{"type": job_type, "payload": {"n": i}} for i in range(n)]
        )
    return [j.id for j in jobs]


async def test_a_worker_carries_on_through_server_errors(
    server: LiveServer,
    keys: Keys,
    job_type: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "queuelog.worker")
    transport = Flaky(
        {
            ("claim", 1): _graphql_error("INTERNAL_SERVER_ERROR"),
            ("claim", 2): httpx.Response(500, content=b"Internal Server Error"),
            ("claim", 3): _graphql_error("TRY_AGAIN"),
            ("claim", 5): _graphql_error("INTERNAL_SERVER_ERROR"),
            # A report the server took, whose answer was lost; then one it never saw.
            ("report", 1): ("after", _graphql_error("INTERNAL_SERVER_ERROR")),
            ("report", 2): httpx.Response(503),
        }
    )
    through(monkeypatch, transport)
    worker = Worker(server.url, keys.worker, concurrency=2, wait_seconds=1)
    worker.carry = False  # reports in requests of their own, so that they meet the plan
    go = asyncio.Event()

    @worker.handler(job_type)
    async def work(job: RunningJob) -> Any:
        await go.wait()
        return {"n": job.payload["n"]}

    ids = await enqueue(server, keys.producer, job_type, 6)
    async with working(worker) as task:
        await until(lambda: transport.seen["claim"] >= 4)  # past the failed claims
        go.set()
        await settled(server, ids)
        await until(lambda: transport.seen["report"] >= 3)
        assert not task.done()  # alive through every failure
    assert transport.injected == 6
    assert history(server, ids) == {i: ONCE for i in ids}  # each job completed once
    assert any("claim failed" in m for m in caplog.messages)


async def test_refused_claims_stop_the_worker_after_its_jobs_are_reported(
    server: LiveServer,
    keys: Keys,
    job_type: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A claim refused for good (not a server error) stops the worker, but the job it is
    running still finishes and is reported: it is not left to its lease."""
    started, go = asyncio.Event(), asyncio.Event()
    transport = Flaky({("claim", 2): _graphql_error("FORBIDDEN")})
    through(monkeypatch, transport)
    worker = Worker(server.url, keys.worker, concurrency=2, wait_seconds=1, prefetch=0)

    @worker.handler(job_type)
    async def work(job: RunningJob) -> Any:
        started.set()
        await go.wait()
        return {"n": job.payload["n"]}

    (job_id,) = await enqueue(server, keys.producer, job_type, 1)
    task = asyncio.create_task(worker.serve())
    try:
        await asyncio.wait_for(started.wait(), 30)
        await until(lambda: transport.seen["claim"] >= 2)  # the refused one is back
        assert not task.done()  # it drains: the running job is its to finish
        go.set()
        with pytest.raises(QueuelogError) as refused:
            await asyncio.wait_for(task, 60)
        assert refused.value.code == "FORBIDDEN"
    finally:
        worker.stop()
        go.set()
        if not task.done():
            task.cancel()
    assert history(server, [job_id]) == {job_id: ONCE}
