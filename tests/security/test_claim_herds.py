"""Waiting claims (long polls) cost in proportion to the work there is, not to how many wait:
a place freed in a limited type wakes one waiter, a rate-limited type's token wakes one, the
`types` of a claim are folded and capped, and one key may have only so many claims waiting.
Through real HTTP, on SQLite and PostgreSQL; the herd tests count the server's claims."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from queuelog.runtime import Services
from tests.api.test_job_types import LIMITS
from tests.support import LiveServer
from tests.workers.longpoll import CountedClaims, answered, client, post, stop, waiting_claims

ENQUEUE = "mutation($t: String!) { enqueueJob(input: {type: $t}) { job { id } } }"
CLAIM_MANY = """mutation($t: [String!], $n: Int!, $w: Int) {
  claimJobs(types: $t, limit: $n, waitSeconds: $w) {
    jobs { id } userErrors { code field message } } }"""
CANCEL = "mutation($id: ID!) { cancelJob(id: $id) { job { status } userErrors { code } } }"
WAITERS = 30


async def _limits(server: LiveServer, key: str, job_type: str, **limits: Any) -> None:
    out = await post(server, key, LIMITS, t=job_type, l=limits)
    assert out["setJobTypeLimits"]["userErrors"] == [], out


async def _enqueue(server: LiveServer, key: str, job_type: str, n: int) -> list[str]:
    return [
        (await post(server, key, ENQUEUE, t=job_type))["enqueueJob"]["job"]["id"] for _ in range(n)
    ]


async def _claim(server: LiveServer, key: str, job_type: str, n: int) -> list[str]:
    out = (await post(server, key, CLAIM_MANY, t=[job_type], n=n))["claimJobs"]
    assert out["userErrors"] == [], out
    return [j["id"] for j in out["jobs"]]


async def _settled(counted: CountedClaims) -> int:
    """The claims counted once a second passes without a new one."""
    while True:
        before = counted.count
        await asyncio.sleep(1.0)
        if counted.count == before:
            return before


async def test_jobs_leaving_running_wake_one_waiter_each(
    live: tuple[LiveServer, str], services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelling the running jobs of a type at its limit frees a place each: each wakes
    one waiting claim, not all of them; and a freed place with a job pending hands that job
    to a waiter."""
    (server, key), job_type = live, "sync"
    counted = CountedClaims(services, monkeypatch)
    await _limits(server, key, job_type, maxRunning=5)
    running = await _enqueue(server, key, job_type, 5)
    assert sorted(await _claim(server, key, job_type, 5)) == sorted(running)
    async with client(key, WAITERS) as http:
        claims_ = waiting_claims(http, server.url, job_type, WAITERS)
        await counted.until(2 * WAITERS)  # each claimed on arrival, and once in line
        before = await _settled(counted)
        for job_id in running[:4]:
            out = await post(server, key, CANCEL, id=job_id)
            assert out["cancelJob"]["job"]["status"] == "CANCELLED", out
        woken = await _settled(counted) - before
        assert 1 <= woken <= 4 + 2, counted.counts  # one a freed place (all of them: 120)
        assert not any(c.done() for c in claims_)
        # The type is at 1 of 5 now; a new job wakes one waiter, which takes it.
        (pending,) = await _enqueue(server, key, job_type, 1)
        (got,) = await answered(claims_, 1)
        assert got == {"job": {"id": pending}, "userErrors": []}
        await stop(claims_)


async def test_a_rate_limits_tokens_wake_one_waiter_each(
    live: tuple[LiveServer, str], services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backlog of a type started at two jobs a second: each token is claimed by one of
    the waiting claims, while the others wait; no token wakes all of them."""
    (server, key), job_type, backlog = live, "pdf", 6
    counted = CountedClaims(services, monkeypatch)
    await _limits(server, key, job_type, maxStartsPerSecond=2)
    jobs = await _enqueue(server, key, job_type, backlog + 2)
    assert len(await _claim(server, key, job_type, 10)) == 2  # the bucket's burst
    async with client(key, WAITERS) as http:
        claims_ = waiting_claims(http, server.url, job_type, WAITERS)
        got = await answered(claims_, backlog)
        assert {a["job"]["id"] for a in got} == set(jobs[2:])  # the two oldest went first
        # Two claims a waiter as it arrives, then about two a token: the holder's, and the
        # next holder's as it takes over (a claim of every waiter at every token: ~200).
        assert counted.count <= 2 * WAITERS + 3 * backlog, counted.counts
        await stop(claims_)


async def test_claim_types_are_folded_and_capped(server: LiveServer, job_type: str) -> None:
    worker = server.create_key("WORKER", [job_type])
    producer = server.create_key("PRODUCER", [job_type])
    many = [f"t{i}" for i in range(101)]
    refused = server.gql(CLAIM_MANY, {"t": many, "n": 1, "w": 5}, worker)["claimJobs"]
    assert refused["jobs"] == []
    assert [(e["code"], e["field"]) for e in refused["userErrors"]] == [
        ("VALIDATION_FAILED", ["types"])
    ]
    assert "at most 100 distinct types" in refused["userErrors"][0]["message"]
    (job_id,) = await _enqueue(server, producer, job_type, 1)
    # A hundred thousand entries of one type are one type.
    folded = server.gql(CLAIM_MANY, {"t": [job_type] * 100_000, "n": 5}, worker)["claimJobs"]
    assert folded == {"jobs": [{"id": job_id}], "userErrors": []}


async def test_a_key_has_a_bounded_number_of_waiting_claims(
    start_server: Any, job_type: str
) -> None:
    server: LiveServer = start_server(max_waiting_claims_per_key=2)
    worker, other = server.create_key("WORKER"), server.create_key("WORKER")
    body = {"query": CLAIM_MANY, "variables": {"t": ["email"], "n": 1, "w": 30}}

    def waiting(http: httpx.AsyncClient) -> asyncio.Task[httpx.Response]:
        return asyncio.create_task(http.post(server.url, json=body))

    async with client(worker, 4) as http, client(other, 2) as http_other:
        mine = [waiting(http), waiting(http)]
        await asyncio.sleep(1.0)
        assert not any(t.done() for t in mine)
        async with asyncio.timeout(10):  # refused at once, not after its 30 s
            third = (await http.post(server.url, json=body)).json()["data"]["claimJobs"]
        assert third["jobs"] == []
        assert [(e["code"], e["field"]) for e in third["userErrors"]] == [
            ("VALIDATION_FAILED", ["waitSeconds"])
        ]
        assert "QUEUELOG_MAX_WAITING_CLAIMS_PER_KEY" in third["userErrors"][0]["message"]
        now = await post(server, worker, CLAIM_MANY, t=["email"], n=1)  # no wait: served
        assert now["claimJobs"] == {"jobs": [], "userErrors": []}
        theirs = waiting(http_other)  # another key's claims are counted apart
        await asyncio.sleep(1.0)
        assert not theirs.done()
        # A job goes to the first claim in line, one of ours; its place is free again.
        (job_id,) = await _enqueue(server, server.admin_key, "email", 1)
        done, _ = await asyncio.wait(mine, return_when=asyncio.FIRST_COMPLETED, timeout=30)
        assert [t.result().json()["data"]["claimJobs"]["jobs"] for t in done] == [[{"id": job_id}]]
        fourth = waiting(http)
        await asyncio.sleep(1.0)
        assert not fourth.done(), fourth.result().json()
        await stop([*mine, theirs, fourth])  # type: ignore[list-item]
