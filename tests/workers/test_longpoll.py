"""A long-poll claim whose client goes away: the server stops waiting for it, and a job it
took in the same instant goes back to the queue at once. Through real HTTP, on both
backends."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
import pytest

from queuelog.runtime import Services
from tests.support import LiveServer
from tests.workers.conftest import Keys

CLAIM_ONE = """mutation($t: [String!], $w: Int) {
  claimJob(types: $t, waitSeconds: $w) { job { id } userErrors { code } } }"""
ENQUEUE = "mutation($t: String!) { enqueueJob(input: {type: $t}) { job { id } } }"
JOB = """query($id: ID!) { job(id: $id) {
  status retryCount claimedAt events { previousStatus status } } }"""


async def post(server: LiveServer, key: str, query: str, **variables: Any) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        response = await http.post(server.url, json={"query": query, "variables": variables})
    body = response.json()
    assert "errors" not in body, body
    return dict(body["data"])


async def abandoned_claim(server: LiveServer, key: str, job_type: str) -> asyncio.Task[Any]:
    """A claimJob(waitSeconds: 20) on its own connection, waiting; cancel the task to
    close the connection."""

    async def claim() -> None:
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(headers=headers, timeout=60) as http:
            body = {"query": CLAIM_ONE, "variables": {"t": [job_type], "w": 20}}
            await http.post(server.url, json=body)

    task = asyncio.create_task(claim())
    await asyncio.sleep(0.5)  # it has arrived and waits
    assert not task.done()
    return task


async def gone(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_a_claim_whose_client_went_away_stops_waiting(
    server: LiveServer, keys: Keys, job_type: str
) -> None:
    await gone(await abandoned_claim(server, keys.worker, job_type))
    await asyncio.sleep(0.5)  # the server has seen the connection close
    job_id = (await post(server, keys.producer, ENQUEUE, t=job_type))["enqueueJob"]["job"]["id"]
    # A waiter still there would have taken it as soon as it was enqueued.
    await asyncio.sleep(1.0)
    job = (await post(server, keys.admin, JOB, id=job_id))["job"]
    assert job["status"] == "PENDING"
    claimed = await post(server, keys.worker, CLAIM_ONE, t=[job_type], w=0)
    assert claimed["claimJob"] == {"job": {"id": job_id}, "userErrors": []}


async def test_a_job_claimed_as_its_client_went_away_goes_back_at_once(
    live: tuple[LiveServer, str], services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, key = live
    job_type = "email"
    service = services.service
    claim = service.claim
    took = asyncio.Event()

    async def claim_then_stall(*args: Any, **kw: Any) -> Any:
        jobs = await claim(*args, **kw)
        if jobs:  # the client goes away before the answer leaves
            took.set()
            await asyncio.sleep(1.0)
        return jobs

    monkeypatch.setattr(service, "claim", claim_then_stall)
    waiting = await abandoned_claim(server, key, job_type)
    job_id = (await post(server, key, ENQUEUE, t=job_type))["enqueueJob"]["job"]["id"]
    await asyncio.wait_for(took.wait(), 30)
    await gone(waiting)
    monkeypatch.setattr(service, "claim", claim)
    for _ in range(200):
        job = (await post(server, key, JOB, id=job_id))["job"]
        if job["status"] == "PENDING":
            break
        await asyncio.sleep(0.05)
    assert (job["status"], job["retryCount"], job["claimedAt"]) == ("PENDING", 0, None)
    assert [(e["previousStatus"], e["status"]) for e in job["events"]] == [
        (None, "PENDING"),
        ("PENDING", "RUNNING"),
        ("RUNNING", "PENDING"),
    ]
    claimed = await post(server, key, CLAIM_ONE, t=[job_type], w=0)
    assert claimed["claimJob"] == {"job": {"id": job_id}, "userErrors": []}
