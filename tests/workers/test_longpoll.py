"""A long-poll claim whose client goes away: the server stops waiting for it, and a job it
took in the same instant goes back to the queue at once. Through real HTTP, on both
backends."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from queuelog.runtime import Services
from queuelog.service.models import Actor, Role
from tests.inprocess import until
from tests.support import LiveServer
from tests.workers.conftest import Keys
from tests.workers.longpoll import (
    CLAIM_ONE,
    CountedClaims,
    answered,
    client,
    post,
    stop,
    waiting_claims,
)

ADMIN = Actor("admin", Role.ADMIN)
ENQUEUE = "mutation($t: String!) { enqueueJob(input: {type: $t}) { job { id } } }"
JOB = """query($id: ID!) { job(id: $id) {
  status retryCount claimedAt events { previousStatus status } } }"""


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
    # The waiter claims for itself: no enqueue claims for it (see the next test).
    monkeypatch.setattr(service.standing, "take", lambda types: [])
    waiting = await abandoned_claim(server, key, job_type)
    job_id = (await post(server, key, ENQUEUE, t=job_type))["enqueueJob"]["job"]["id"]
    await asyncio.wait_for(took.wait(), 30)
    await gone(waiting)
    monkeypatch.setattr(service, "claim", claim)
    await went_back(server, key, job_id, job_type)


async def test_a_job_handed_to_a_claim_as_its_client_went_away_goes_back_at_once(
    live: tuple[LiveServer, str], services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The enqueue's transaction claims the job for the waiting claim, whose client goes
    away before that transaction commits."""
    server, key = live
    job_type = "email"
    service = services.service
    insert_and_claim = service._insert_and_claim
    took = threading.Event()

    def stall_after(*args: Any) -> Any:
        out = insert_and_claim(*args)
        took.set()
        time.sleep(1.0)  # in the writer thread, before the commit
        return out

    monkeypatch.setattr(service, "_insert_and_claim", stall_after)
    waiting = await abandoned_claim(server, key, job_type)
    enqueue = asyncio.create_task(post(server, key, ENQUEUE, t=job_type))
    await asyncio.wait_for(asyncio.to_thread(took.wait, 30), 35)
    await gone(waiting)
    job_id = (await enqueue)["enqueueJob"]["job"]["id"]
    await went_back(server, key, job_id, job_type)


async def went_back(server: LiveServer, key: str, job_id: str, job_type: str) -> None:
    """The job was claimed once, then given back (not counted as an attempt)."""
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


async def test_a_job_wakes_one_waiting_claim_not_all(
    live: tuple[LiveServer, str], services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    (server, key), n = live, 5
    counted = CountedClaims(services, monkeypatch)
    async with client(key, n) as http:
        waiting = waiting_claims(http, server.url, "pdf", n)
        # Each claimed before and after joining the line, found nothing and waits in it.
        await counted.until(2 * n)
        first = (await post(server, key, ENQUEUE, t="pdf"))["enqueueJob"]["job"]["id"]
        assert await answered(waiting, 1) == [{"job": {"id": first}, "userErrors": []}]
        assert counted.count == 2 * n + 1
        second = (await post(server, key, ENQUEUE, t="pdf"))["enqueueJob"]["job"]["id"]
        answers = await answered(waiting, 2)
        assert {a["job"]["id"] for a in answers} == {first, second}
        assert counted.count == 2 * n + 2  # the other waiters were never woken
        await stop(waiting)


async def test_a_job_enqueued_here_is_handed_to_one_waiting_claim(
    live: tuple[LiveServer, str], services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The enqueue's own transaction claims the job for the first claim in line: no claim
    wakes to claim for itself, then or when the change feed reads the job's events."""
    (server, key), n = live, 5
    counted = CountedClaims(services, monkeypatch, handoff=True)
    async with client(key, n) as http:
        waiting = waiting_claims(http, server.url, "pdf", n)
        await counted.until(2 * n)
        ids = []
        for k in (1, 2):
            ids.append((await post(server, key, ENQUEUE, t="pdf"))["enqueueJob"]["job"]["id"])
            answers = await answered(waiting, k)
            assert {a["job"]["id"] for a in answers} == set(ids)
        await asyncio.sleep(0.5)  # the feed has read both jobs' events meanwhile
        assert counted.count == 2 * n
        assert len(services.service.standing) == n - 2
        job = (await post(server, key, JOB, id=ids[0]))["job"]
        assert job["status"] == "RUNNING" and job["claimedAt"] is not None
        await stop(waiting)


async def test_a_handed_job_has_the_lease_its_claim_asked_for_and_a_paused_type_none(
    live: tuple[LiveServer, str], services: Services
) -> None:
    """The claim an enqueue makes for a waiting claim is that claim: its lease, and no job of
    a paused type (the claim goes on waiting, and takes the job once the type resumes)."""
    server, key = live
    query = """mutation($t: [String!]) { claimJob(types: $t, leaseSeconds: 7, waitSeconds: 20) {
      job { id claimedAt leaseExpiresAt } } }"""
    waiting = asyncio.create_task(post(server, key, query, t=["email"]))
    await until(lambda: len(services.service.standing) == 1)
    job_id = (await post(server, key, ENQUEUE, t="email"))["enqueueJob"]["job"]["id"]
    job = (await waiting)["claimJob"]["job"]
    lease = datetime.fromisoformat(job["leaseExpiresAt"]) - datetime.fromisoformat(job["claimedAt"])
    assert (job["id"], lease) == (job_id, timedelta(seconds=7))

    await services.job_types.pause(ADMIN, "sync")
    waiting = asyncio.create_task(post(server, key, query, t=["sync"]))
    await until(lambda: len(services.service.standing) == 1)
    paused = (await post(server, key, ENQUEUE, t="sync"))["enqueueJob"]["job"]["id"]
    await asyncio.sleep(0.3)
    assert not waiting.done()
    await services.job_types.resume(ADMIN, "sync")
    assert (await waiting)["claimJob"]["job"]["id"] == paused


async def test_as_many_jobs_as_waiting_claims_answer_them_all(
    live: tuple[LiveServer, str], services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    (server, key), n = live, 4
    counted = CountedClaims(services, monkeypatch)
    async with client(key, n) as http:
        waiting = waiting_claims(http, server.url, "email", n)
        await counted.until(2 * n)
        ids = [
            (await post(server, key, ENQUEUE, t="email"))["enqueueJob"]["job"]["id"]
            for _ in range(n)
        ]
        answers = await answered(waiting, n)
        assert sorted(a["job"]["id"] for a in answers) == sorted(ids)
        await stop(waiting)


async def test_a_woken_claim_whose_job_was_taken_leaves_the_next_job_to_the_line(
    live: tuple[LiveServer, str], services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    (server, key), n = live, 3
    counted = CountedClaims(services, monkeypatch)
    async with client(key, n) as http:
        waiting = waiting_claims(http, server.url, "sync", n)
        await counted.until(2 * n)
        counted.steal_next = True
        await post(server, key, ENQUEUE, t="sync")
        await counted.until(2 * n + 1)  # the woken claim found nothing: it was taken
        assert not any(t.done() for t in waiting)
        job_id = (await post(server, key, ENQUEUE, t="sync"))["enqueueJob"]["job"]["id"]
        assert await answered(waiting, 1) == [{"job": {"id": job_id}, "userErrors": []}]
        await stop(waiting)


async def test_an_enqueue_on_another_replica_wakes_a_waiting_claim(
    server: LiveServer, sibling: LiveServer, keys: Keys, job_type: str
) -> None:
    """b's claim waits; a's enqueue reaches b's waiters through the change feed (NOTIFY on
    PostgreSQL, its polling on SQLite). b's claims never recheck on their own, so the job
    reaches the claim only by that wake, before its 20 s are up."""
    waiting = asyncio.create_task(post(sibling, keys.worker, CLAIM_ONE, t=[job_type], w=20))
    await asyncio.sleep(0.5)  # it has claimed once and waits (if not, it finds the job at once)
    job_id = (await post(server, keys.producer, ENQUEUE, t=job_type))["enqueueJob"]["job"]["id"]
    claimed = await waiting
    assert claimed["claimJob"] == {"job": {"id": job_id}, "userErrors": []}
