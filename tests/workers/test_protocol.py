"""The worker protocol's server side (next contract): long-poll claims, progress, cancel
reaching the holder, acks safe to repeat. Through HTTP and WebSocket, on both backends."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from queuelog.client import AsyncClient, JobStatus
from queuelog.worker import RunningJob, Worker
from tests.support import LiveServer
from tests.workers.conftest import Keys
from tests.workers.helpers import settled, until, working

CLAIM = """mutation($t: [String!], $w: Int, $lease: Int) {
  claimJobs(limit: 2, types: $t, waitSeconds: $w, leaseSeconds: $lease) {
    jobs { id } userErrors { code field } } }"""
CLAIM_ONE = """mutation($t: [String!], $w: Int) {
  claimJob(types: $t, waitSeconds: $w) { job { id } userErrors { code field } } }"""
HEARTBEAT = """mutation($id: ID!, $p: JSON) {
  heartbeatJob(id: $id, progress: $p) { job { status progress } userErrors { code } } }"""
COMPLETE = """mutation($id: ID!) {
  completeJob(id: $id, result: {ok: true}) { job { status result } userErrors { code } } }"""
FAIL = """mutation($id: ID!, $r: Boolean) {
  failJob(id: $id, error: "boom", retryable: $r) { job { status retryCount } willRetry
    userErrors { code } } }"""


def enqueue(server: LiveServer, keys: Keys, job_type: str, **fields: Any) -> str:
    query = "mutation($i: EnqueueJobInput!) { enqueueJob(input: $i) { job { id } } }"
    data = server.gql(query, {"i": {"type": job_type, **fields}}, keys.producer)
    return str(data["enqueueJob"]["job"]["id"])


def claim(server: LiveServer, key: str, job_type: str, **kw: Any) -> list[str]:
    out = server.gql(CLAIM, {"t": [job_type], **kw}, key)["claimJobs"]
    assert not out["userErrors"], out
    return [j["id"] for j in out["jobs"]]


async def test_a_waiting_claim_answers_when_a_job_arrives(
    server: LiveServer, keys: Keys, job_type: str
) -> None:
    # Shorter than the waiters' own re-check: only the enqueue's wake-up can answer it.
    waiting = asyncio.create_task(asyncio.to_thread(claim, server, keys.worker, job_type, w=1))
    await asyncio.sleep(0.3)
    first = enqueue(server, keys, job_type)
    assert await waiting == [first]
    single = asyncio.create_task(
        asyncio.to_thread(server.gql, CLAIM_ONE, {"t": [job_type], "w": 1}, keys.worker)
    )
    await asyncio.sleep(0.3)
    second = enqueue(server, keys, job_type)
    assert (await single)["claimJob"] == {"job": {"id": second}, "userErrors": []}


def test_a_waiting_claim_with_nothing_to_claim_answers_empty(
    server: LiveServer, keys: Keys, job_type: str, other_job_type: str
) -> None:
    admin = keys.admin
    enqueue_other = server.gql(
        "mutation($t: String!) { enqueueJob(input: {type: $t}) { job { id } } }",
        {"t": other_job_type}, admin,
    )  # fmt: skip
    assert enqueue_other["enqueueJob"]["job"]
    assert claim(server, keys.worker, job_type, w=1) == []


@pytest.mark.parametrize("wait", [-1, 61])
def test_wait_seconds_is_bounded(server: LiveServer, keys: Keys, job_type: str, wait: int) -> None:
    out = server.gql(CLAIM, {"t": [job_type], "w": wait}, keys.worker)["claimJobs"]
    assert out["userErrors"] == [{"code": "VALIDATION_FAILED", "field": ["waitSeconds"]}]


def test_repeated_acks_answer_like_the_first(server: LiveServer, keys: Keys, job_type: str) -> None:
    done, retried, failed = (enqueue(server, keys, job_type, maxRetries=m) for m in (3, 3, 0))
    assert sorted(claim(server, keys.worker, job_type)) == sorted([done, retried])
    assert claim(server, keys.worker, job_type) == [failed]
    for _ in range(2):
        out = server.gql(COMPLETE, {"id": done}, keys.worker)["completeJob"]
        assert out == {"job": {"status": "COMPLETED", "result": {"ok": True}}, "userErrors": []}
        out = server.gql(FAIL, {"id": retried, "r": True}, keys.worker)["failJob"]
        assert out["userErrors"] == [] and out["willRetry"] is True
        assert out["job"] == {"status": "PENDING", "retryCount": 1}
        out = server.gql(FAIL, {"id": failed, "r": True}, keys.worker)["failJob"]
        assert out["userErrors"] == [] and out["willRetry"] is False
        assert out["job"] == {"status": "FAILED", "retryCount": 0}
    other = server.create_key("WORKER", [job_type])
    out = server.gql(COMPLETE, {"id": done}, other)["completeJob"]
    assert out["job"] is None and out["userErrors"][0]["code"] in ("NOT_FOUND", "NOT_JOB_OWNER")


def test_a_worker_whose_lease_expired_still_hears_not_job_owner(
    server: LiveServer, keys: Keys, job_type: str
) -> None:
    job_id = enqueue(server, keys, job_type)
    assert claim(server, keys.worker, job_type, lease=1) == [job_id]
    other = server.create_key("WORKER", [job_type])
    for _ in range(10):  # the maintenance loop gives the job back after the lease and a backoff
        if claim(server, other, job_type, w=5) == [job_id]:
            break
    assert server.gql(COMPLETE, {"id": job_id}, other)["completeJob"]["userErrors"] == []
    late = server.gql(COMPLETE, {"id": job_id}, keys.worker)["completeJob"]
    assert late["userErrors"] == [{"code": "NOT_JOB_OWNER"}]


def test_a_cancelled_running_job_answers_its_holder_s_heartbeat(
    server: LiveServer, keys: Keys, job_type: str
) -> None:
    job_id = enqueue(server, keys, job_type)
    assert claim(server, keys.worker, job_type) == [job_id]
    server.gql("mutation($id: ID!) { cancelJob(id: $id) { job { id } } }", {"id": job_id},
               keys.producer)  # fmt: skip
    out = server.gql(HEARTBEAT, {"id": job_id}, keys.worker)["heartbeatJob"]
    assert out == {"job": {"status": "CANCELLED", "progress": None},
                   "userErrors": [{"code": "INVALID_STATE"}]}  # fmt: skip


async def test_progress_is_stored_and_streamed(
    server: LiveServer, keys: Keys, job_type: str
) -> None:
    job_id = enqueue(server, keys, job_type)
    assert claim(server, keys.worker, job_type) == [job_id]
    out = server.gql(HEARTBEAT, {"id": job_id, "p": {"done": 1}}, keys.worker)["heartbeatJob"]
    assert out == {"job": {"status": "RUNNING", "progress": {"done": 1}}, "userErrors": []}
    big = server.gql(HEARTBEAT, {"id": job_id, "p": "x" * 5000}, keys.worker)["heartbeatJob"]
    assert big["userErrors"] == [{"code": "PAYLOAD_TOO_LARGE"}]
    reports: list[Any] = []
    async with AsyncClient(server.url, keys.producer) as producer:

        async def listen() -> None:
            async for report in producer.progress(job_id):
                reports.append(report.progress)

        listener = asyncio.create_task(listen())
        await until(lambda: reports == [{"done": 1}])  # the current progress comes first
        server.gql(HEARTBEAT, {"id": job_id, "p": {"done": 2}}, keys.worker)
        await until(lambda: len(reports) == 2)
        server.gql(COMPLETE, {"id": job_id}, keys.worker)
        await asyncio.wait_for(listener, 30)  # ends with the job
        assert (await producer.job(job_id)).progress == {"done": 2}  # type: ignore[union-attr]
    assert reports == [{"done": 1}, {"done": 2}]


async def test_a_worker_s_progress_reaches_a_listener(
    server: LiveServer, keys: Keys, job_type: str
) -> None:
    worker = Worker(server.url, keys.worker, lease_seconds=30)
    release = asyncio.Event()

    @worker.handler(job_type)
    async def handle(job: RunningJob) -> None:
        job.progress({"step": 1})
        await release.wait()

    job_id = enqueue(server, keys, job_type)
    async with working(worker), AsyncClient(server.url, keys.producer) as producer:
        reports = producer.progress(job_id)
        first = await asyncio.wait_for(anext(reports), 30)
        assert first.progress == {"step": 1} and first.job.status is JobStatus.RUNNING
        release.set()
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(anext(reports), 30)
    [job] = await settled(server, [job_id])
    assert job.status is JobStatus.COMPLETED and job.progress == {"step": 1}
