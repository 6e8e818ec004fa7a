"""The worker against a faulty or hostile server: a scripted fake (`tests.workers.fakeserver`)
hands it jobs of a type it has no handler for, one job several times, a lease already over,
and malformed answers; a tampering proxy in front of a live server (both backends) does
the same to real jobs. The worker never crashes, never runs one job twice at once, never
spins: it fails what it cannot run, runs each job once, and backs off from what it cannot
read."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

import pytest

from queuelog.client import AsyncClient, JobStatus
from queuelog.worker import RunningJob, Worker
from tests.support import LiveServer
from tests.workers.conftest import Keys
from tests.workers.fakeserver import Script, claimed, job, scripted, serving, tampering
from tests.workers.helpers import history, settled, until, working

ONCE = [(None, "PENDING"), ("PENDING", "RUNNING"), ("RUNNING", "COMPLETED")]
NO_HANDLER = "NoHandler: this worker has no handler for the job type 'stranger'"


async def test_a_job_of_a_type_without_a_handler_is_failed_and_the_worker_goes_on() -> None:
    script = Script(claims=[claimed(job("1", "stranger"), job("2", "mine"))])
    ran: list[str] = []
    with serving(scripted(script)) as url:
        worker = Worker(url, "key", concurrency=2)

        @worker.handler("mine")
        async def mine(j: RunningJob) -> str:
            ran.append(j.id)
            return "ok"

        async with working(worker) as task:
            await until(lambda: {"1", "2"} <= set(script.reports))
            heard = script.claims_heard
            await until(lambda: script.claims_heard > heard)  # it claims on
            assert not task.done()
    # retryable: a worker that has the handler may run it
    assert script.reports["1"] == {"error": NO_HANDLER, "retryable": True}
    assert script.reports["2"] == {"result": "ok"}
    assert ran == ["2"]


async def test_a_job_handed_over_several_times_runs_once() -> None:
    # Three times in one answer, and again in the next claim while it runs.
    script = Script(claims=[claimed(*[job("7", "mine")] * 3), claimed(job("7", "mine"))])
    runs = 0
    with serving(scripted(script)) as url:
        worker = Worker(url, "key", concurrency=4)

        @worker.handler("mine")
        async def mine(j: RunningJob) -> str:
            nonlocal runs
            runs += 1
            # the third claim goes once the second's answer (the repeat) was read
            await until(lambda: script.claims_heard >= 3)
            return "ok"

        async with working(worker):
            await until(lambda: "7" in script.reports)
    assert runs == 1
    assert script.reports == {"7": {"result": "ok"}}


async def test_a_job_handed_back_after_its_outcome_went_out_runs_again() -> None:
    """A retry of a job whose report is on its way (carried by the very claim that brings
    the job back) is no repeat: it runs again, after the first run."""
    script = Script(claims=[claimed(job("3", "mine")), claimed(job("3", "mine"))])
    runs = 0
    with serving(scripted(script)) as url:
        worker = Worker(url, "key", concurrency=1)

        @worker.handler("mine")
        async def mine(j: RunningJob) -> str:
            nonlocal runs
            runs += 1
            return "ok"

        async with working(worker):
            await until(lambda: runs == 2 and script.claims_heard >= 3)
    assert script.reports == {"3": {"result": "ok"}}


async def test_a_lease_granted_already_over_does_not_make_heartbeats_spin() -> None:
    script = Script(claims=[claimed(job("9", "mine", lease=-5))], lease=-5)
    with serving(scripted(script)) as url:
        worker = Worker(url, "key", concurrency=1)

        @worker.handler("mine")
        async def mine(j: RunningJob) -> str:
            await asyncio.sleep(1.0)
            return "ok"

        async with working(worker):
            await until(lambda: "9" in script.reports)
    # one heartbeat per 0.2 s at the most (once: hundreds in that second)
    assert 1 <= len(script.heartbeats) <= 6, len(script.heartbeats)
    assert script.reports["9"] == {"result": "ok"}


MALFORMED: list[dict[str, Any] | bytes] = [
    b"<html>not GraphQL</html>",
    b'["not", "an object"]',
    {"errors": "not a list"},
    {"errors": ["not an object"]},
    {"data": {"claimJobs": {"jobs": [{"id": "x"}], "userErrors": []}}},  # fields missing
    claimed({**job("4", "mine"), "status": "NO_SUCH_STATUS"}),
    {"data": {"claimJobs": {"jobs": "not a list", "userErrors": []}}},
    {"data": None},
]


async def test_a_malformed_answer_is_a_server_fault_the_worker_backs_off_from(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = Script(claims=[*MALFORMED, claimed(job("5", "mine"))])
    with serving(scripted(script)) as url:
        worker = Worker(url, "key", concurrency=1)

        @worker.handler("mine")
        async def mine(j: RunningJob) -> str:
            return "ok"

        with caplog.at_level(logging.WARNING, logger="queuelog.worker"):
            async with working(worker) as task:
                await until(lambda: "5" in script.reports, seconds=90)
                assert not task.done()
    assert script.reports == {"5": {"result": "ok"}}
    retried = [r.getMessage() for r in caplog.records if "claim failed" in r.getMessage()]
    assert len(retried) == len(MALFORMED), retried
    assert all("BAD_RESPONSE" in m for m in retried), retried


# -- a live server behind a tampering proxy ----------------------------------------------------


def doubled(body: dict[str, Any]) -> dict[str, Any]:
    """Every claimed job twice in the answer."""
    claim = (body.get("data") or {}).get("claimJobs")
    if claim and claim.get("jobs"):
        claim["jobs"] = [j for j in claim["jobs"] for _ in range(2)]
    return body


async def test_a_live_server_s_jobs_doubled_by_a_proxy_each_run_once(
    server: LiveServer, keys: Keys, job_type: str
) -> None:
    runs: Counter[str] = Counter()
    with serving(tampering(server.url, doubled)) as url:
        worker = Worker(url, keys.worker, concurrency=4)

        @worker.handler(job_type)
        async def handle(j: RunningJob) -> str:
            runs[j.id] += 1
            await asyncio.sleep(0.05)  # a second run of it would overlap
            return "ok"

        async with AsyncClient(server.url, keys.producer) as producer:
            ids = [(await producer.enqueue(job_type, {"n": n})).id for n in range(12)]
        async with working(worker):
            jobs = await settled(server, ids)
    assert all(j.status is JobStatus.COMPLETED for j in jobs)
    assert runs == Counter({i: 1 for i in ids})
    assert all(h == ONCE for h in history(server, ids).values())


async def test_a_live_server_s_job_of_an_unknown_type_is_failed_retryable_then_runs(
    server: LiveServer, keys: Keys, job_type: str
) -> None:
    renamed: list[str] = []

    def once_a_stranger(body: dict[str, Any]) -> dict[str, Any]:
        claim = (body.get("data") or {}).get("claimJobs")
        if claim and claim.get("jobs") and not renamed:
            claim["jobs"][0]["type"] = "stranger"
            renamed.append(claim["jobs"][0]["id"])
        return body

    with serving(tampering(server.url, once_a_stranger)) as url:
        worker = Worker(url, keys.worker, concurrency=1)

        @worker.handler(job_type)
        async def handle(j: RunningJob) -> str:
            return "ok"

        async with AsyncClient(server.url, keys.producer) as producer:
            job_id = (await producer.enqueue(job_type, {})).id
        async with working(worker):
            [done] = await settled(server, [job_id])
    assert renamed == [job_id]
    assert done.status is JobStatus.COMPLETED and done.retry_count == 1
    assert done.error == NO_HANDLER  # the failed attempt's error is kept
