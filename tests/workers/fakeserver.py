"""A GraphQL endpoint that answers a worker's documents as a test scripts them: a faulty or
hostile server (duplicate jobs, jobs of types never asked for, leases already over,
malformed answers), or a proxy in front of a real server that tampers with its answers.

It runs under uvicorn on a thread of its own, so the worker under test talks to it over
real HTTP."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.server import free_port

Answer = dict[str, Any] | bytes  # a JSON body, or raw bytes sent as they are


def job(job_id: str, job_type: str, lease: float = 30.0) -> dict[str, Any]:
    """A claimed job as the server answers it, its lease `lease` seconds (negative: over)."""
    now = datetime.now(UTC)
    at = now.isoformat()
    return {
        "id": job_id, "type": job_type, "payload": {}, "priority": "MEDIUM",
        "status": "RUNNING", "retryCount": 0, "maxRetries": 3, "producer": "p",
        "runAt": at, "claimedAt": at, "workerId": "w",
        "leaseExpiresAt": (now + timedelta(seconds=lease)).isoformat(),
        "createdAt": at, "updatedAt": at, "finishedAt": None,
    }  # fmt: skip


def claimed(*jobs: dict[str, Any]) -> dict[str, Any]:
    return {"data": {"claimJobs": {"jobs": list(jobs), "userErrors": []}}}


@dataclass
class Script:
    """What the fake answers: each claim the next of `claims` (then none, after a short
    wait, as a long poll would), each heartbeat the job with a lease of `lease` seconds;
    and what it heard."""

    claims: list[Answer]
    lease: float = 30.0
    claims_heard: int = 0
    heartbeats: list[str] = field(default_factory=list)
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)  # by job id

    async def answer(self, body: dict[str, Any]) -> Answer:
        query, variables = body["query"], body.get("variables") or {}
        if "__type(" in query:  # the client's feature probe: as with introspection off
            return {"errors": [{"message": "off", "extensions": {"code": "FORBIDDEN"}}]}
        if "heartbeatJob" in query:
            self.heartbeats.append(variables["id"])
            beat = {"job": job(variables["id"], "any", self.lease), "userErrors": []}
            return {"data": {"heartbeatJob": beat}}
        data: dict[str, Any] = {}
        k = 0
        while f"i{k}" in variables:  # reports: aliased completeJob / failJob fields
            job_id = variables[f"i{k}"]
            failed = f"e{k}" in variables
            self.reports[job_id] = (
                {"error": variables[f"e{k}"], "retryable": variables[f"y{k}"]}
                if failed
                else {"result": variables.get(f"r{k}")}
            )
            status = "FAILED" if failed else "COMPLETED"
            data[f"a{k}"] = {"job": {"id": job_id, "status": status}, "willRetry": False,
                             "userErrors": []}  # fmt: skip
            k += 1
        if "reportJobs" in query:  # reports: one reportJobs field
            answers = []
            for outcome in variables["outcomes"]:
                job_id, failed = outcome["id"], outcome.get("error") is not None
                self.reports[job_id] = (
                    {"error": outcome["error"], "retryable": outcome.get("retryable", True)}
                    if failed
                    else {"result": outcome.get("result")}
                )
                status = "FAILED" if failed else "COMPLETED"
                answers.append({"job": {"id": job_id, "status": status}, "willRetry": False,
                                "userErrors": []})  # fmt: skip
            data["reportJobs"] = {"outcomes": answers}
        if "claimJobs" in query:
            self.claims_heard += 1
            if self.claims:
                scripted = self.claims.pop(0)
                if isinstance(scripted, bytes) or not data:
                    return scripted
                return {"data": {**data, **scripted.get("data", {})}}
            await asyncio.sleep(min(0.3, float(variables.get("wait") or 0)))
            data["claimJobs"] = {"jobs": [], "userErrors": []}
        return {"data": data}


def scripted(script: Script) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        answer = await script.answer(orjson.loads(await request.body()))
        if isinstance(answer, bytes):
            return Response(answer, media_type="text/html")
        return Response(orjson.dumps(answer), media_type="application/json")

    return endpoint


def tampering(
    upstream: str, change: Callable[[dict[str, Any]], dict[str, Any]]
) -> Callable[[Request], Awaitable[Response]]:
    """A proxy to the real server at `upstream` that passes each answer through `change`."""
    client = httpx.AsyncClient(timeout=60)

    async def endpoint(request: Request) -> Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("authorization",
                   "content-type", "accept")}  # fmt: skip
        got = await client.post(upstream, content=await request.body(), headers=headers)
        body = change(orjson.loads(got.content))
        return Response(orjson.dumps(body), got.status_code, media_type="application/json")

    return endpoint


@contextmanager
def serving(endpoint: Callable[[Request], Awaitable[Response]]) -> Iterator[str]:
    """The GraphQL URL of `endpoint`, served on a free port while the block runs."""
    app = Starlette(routes=[Route("/graphql", endpoint, methods=["POST"])])
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, name="fake-graphql", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the fake server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/graphql"
    finally:
        server.should_exit = True
        thread.join(10)
