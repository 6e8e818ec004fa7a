"""`queuelog.client` against a live server on both backends."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from queuelog.client import (
    AsyncClient,
    Client,
    ConnectionFailed,
    Failed,
    Job,
    JobStatus,
    Priority,
    QueuelogError,
    Reported,
    Settlement,
    UserError,
)
from tests.support import LiveServer
from tests.workers.conftest import Keys, restart


def test_enqueue_read_list_and_cancel(server: LiveServer, keys: Keys, job_type: str) -> None:
    with Client(server.url, keys.producer) as client:
        job = client.enqueue(
            job_type, {"to": "a@example.com"}, priority="high", idempotency_key="k1", max_retries=5
        )
        assert (job.type, job.payload, job.priority) == (
            job_type,
            {"to": "a@example.com"},
            Priority.HIGH,
        )
        assert (job.status, job.max_retries, job.idempotency_key) == (JobStatus.PENDING, 5, "k1")
        assert client.enqueue(job_type, {"to": "a@example.com"}, priority="high",
                              idempotency_key="k1", max_retries=5).id == job.id  # fmt: skip
        later = client.enqueue(job_type, delay=3600)
        assert later.run_at > datetime.now(UTC) + timedelta(minutes=50)
        many = client.enqueue_many([{"type": job_type, "payload": {"n": i}} for i in range(3)])
        assert [j.payload["n"] for j in many] == [0, 1, 2]
        assert client.job(job.id) == job
        assert client.job("999999999") is None
        page = client.jobs(type=job_type, first=2)
        assert [j.id for j in page.jobs] == [many[2].id, many[1].id] and page.has_next_page
        rest = client.jobs(type=job_type, after=page.end_cursor)
        assert [j.id for j in rest.jobs] == [many[0].id, later.id, job.id]
        assert client.jobs(type=job_type, status="pending", first=100).jobs[0].id == many[2].id
        cancelled = client.cancel(later.id)
        assert cancelled.status is JobStatus.CANCELLED and cancelled.finished_at is not None


def test_errors_carry_the_server_s_code(
    server: LiveServer, keys: Keys, job_type: str, other_job_type: str
) -> None:
    with Client(server.url, keys.producer) as client:
        with pytest.raises(UserError) as refused:
            client.enqueue(other_job_type)
        assert refused.value.code == "JOB_TYPE_NOT_ALLOWED"
        job = client.enqueue(job_type)
        client.cancel(job.id)
        with pytest.raises(UserError) as again:
            client.cancel(job.id)
        assert again.value.code == "INVALID_STATE"
        assert again.value.job is not None and again.value.job.status is JobStatus.CANCELLED
        with pytest.raises(UserError) as many:
            client.enqueue_many([{"type": job_type}, {"type": job_type, "max_retries": 99}])
        assert many.value.code == "VALIDATION_FAILED"
    with Client(server.url, keys.worker) as worker, pytest.raises(QueuelogError) as forbidden:
        worker.enqueue(job_type)
    assert forbidden.value.code == "FORBIDDEN"
    with Client(server.url, "ql_wrong") as nobody, pytest.raises(QueuelogError) as unknown:
        nobody.jobs()
    assert unknown.value.code == "UNAUTHENTICATED"
    with Client("http://127.0.0.1:9/graphql", "x") as down, pytest.raises(ConnectionFailed):
        down.jobs()


def test_url_and_key_come_from_the_environment(
    server: LiveServer, keys: Keys, job_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUEUELOG_URL", server.url)
    monkeypatch.setenv("QUEUELOG_KEY", keys.producer)
    with Client() as client:
        assert client.enqueue(job_type).producer == client.jobs().jobs[0].producer


async def test_async_client_and_the_worker_calls(
    server: LiveServer, keys: Keys, job_type: str
) -> None:
    async with (
        AsyncClient(server.url, keys.producer) as producer,
        AsyncClient(server.url, keys.worker) as worker,
    ):
        first = await producer.enqueue(job_type, {"n": 1})
        second = await producer.enqueue(job_type, {"n": 2}, priority="critical")
        claimed = await worker.claim(5, types=[job_type], lease_seconds=60)
        assert [j.id for j in claimed] == [second.id, first.id]
        assert claimed[0].lease_seconds == pytest.approx(60, abs=1)
        assert (await worker.heartbeat(first.id, lease_seconds=120)).lease_seconds == pytest.approx(
            120, abs=1
        )
        done = await worker.complete(first.id, {"sent": True})
        assert (done.status, done.result) == (JobStatus.COMPLETED, {"sent": True})
        failed = await worker.fail(second.id, "ValueError: no", retryable=False)
        assert failed.job.status is JobStatus.FAILED and not failed.will_retry
        with pytest.raises(UserError) as refused:
            await worker.complete(first.id + "0")
        assert refused.value.code == "NOT_FOUND"


@pytest.mark.parametrize("brief", [False, True])
async def test_several_outcomes_in_one_request_then_a_claim(
    server: LiveServer, keys: Keys, job_type: str, brief: bool
) -> None:
    """`settle` answers each outcome with the job, `report` with its id and status; each
    refusal is that outcome's alone; `…_and_claim` claims after the outcomes."""
    async with (
        AsyncClient(server.url, keys.producer) as producer,
        AsyncClient(server.url, keys.worker) as worker,
    ):
        ids = [(await producer.enqueue(job_type, {"n": i}, max_retries=1)).id for i in range(5)]
        await worker.claim(3, types=[job_type])
        await producer.cancel(ids[2])
        outcomes = [
            Settlement(ids[1], False, error="ValueError: again"),
            Settlement(ids[0], True, result={"ok": 0}),
            Settlement(ids[2], True, result={"ok": 2}),  # cancelled meanwhile
        ]
        if brief:
            answers, jobs = await worker.report_and_claim(outcomes, 5, types=[job_type])
            assert answers[0] == Reported(ids[1], JobStatus.PENDING, will_retry=True)
            assert answers[1] == Reported(ids[0], JobStatus.COMPLETED)
            assert (answers[2].status, answers[2].refused is not None) == (
                JobStatus.CANCELLED,
                True,
            )
            assert answers[2].refused is not None and answers[2].refused.code == "INVALID_STATE"
        else:
            full, jobs = await worker.settle_and_claim(outcomes, 5, types=[job_type])
            failed, done, refused = full
            assert isinstance(failed, Failed) and failed.will_retry
            assert isinstance(done, Job) and done.status is JobStatus.COMPLETED
            assert isinstance(refused, UserError) and refused.code == "INVALID_STATE"
            assert refused.job is not None and refused.job.status is JobStatus.CANCELLED
        # The retried job is back in the queue, behind its backoff or not: the claim ran
        # after the outcomes, and took what was claimable then.
        assert {j.id for j in jobs} <= {ids[1], ids[3], ids[4]} and {ids[3], ids[4]} <= {
            j.id for j in jobs
        }
        rest = [Settlement(j.id, True) for j in jobs]
        finished = await (worker.report(rest) if brief else worker.settle(rest))
        assert len(finished) == len(jobs)


async def test_watch_resumes_after_a_restart_with_no_gap_and_no_duplicate(
    own_server: LiveServer,
) -> None:
    server = own_server
    producer = server.create_key("PRODUCER", ["email"])
    seen: list[tuple[str, str]] = []
    async with AsyncClient(server.url, server.admin_key) as admin:
        events = admin.watch(type="email")
        before = await producer_enqueue(server, producer, 1)
        # The subscription starts live: wait for it to be up before counting on events.
        watching = asyncio.ensure_future(anext(events))
        await asyncio.sleep(0.5)
        await producer_enqueue(server, producer, 1)
        e = await asyncio.wait_for(watching, 15)
        seen.append((e.job.id, e.status.value))
        await asyncio.to_thread(restart, server)  # drops the connection
        made = await producer_enqueue(server, producer, 3)
        while len(seen) < 4:
            e = await asyncio.wait_for(anext(events), 30)
            seen.append((e.job.id, e.status.value))
        await events.aclose()
    assert before[0] not in {job_id for job_id, _ in seen}
    assert [job_id for job_id, _ in seen[1:]] == made
    assert len(set(seen)) == len(seen)


async def producer_enqueue(server: LiveServer, key: str, n: int) -> list[str]:
    async with AsyncClient(server.url, key) as client:
        return [(await client.enqueue("email")).id for _ in range(n)]


def test_sync_watch_resumes_from_a_persisted_cursor(
    server: LiveServer, keys: Keys, job_type: str
) -> None:
    with Client(server.url, keys.producer) as client:
        a, b = client.enqueue(job_type), client.enqueue(job_type)
        # The caller stored the cursor of a's creation: only what came after comes back.
        events = client.watch(type=job_type, after=_creation_cursor(server, keys, a.id))
        first = next(events)
        assert (first.job.id, first.status, first.previous_status) == (
            b.id,
            JobStatus.PENDING,
            None,
        )
        client.cancel(a.id)
        second = next(events)
        assert (second.job.id, second.status) == (a.id, JobStatus.CANCELLED)
        assert int(second.cursor) > int(first.cursor)
        events.close()


def _creation_cursor(server: LiveServer, keys: Keys, job_id: str) -> str:
    data = server.gql(
        "query($id: ID!) { job(id: $id) { events { cursor } } }", {"id": job_id}, keys.producer
    )
    return str(data["job"]["events"][0]["cursor"])


async def test_watching_one_job_misses_nothing_across_a_drop_before_its_first_event(
    own_server: LiveServer,
) -> None:
    server = own_server
    producer = server.create_key("PRODUCER", ["email"])
    worker_key = server.create_key("WORKER", ["email"])
    async with AsyncClient(server.url, producer) as client:
        job = await client.enqueue("email")
        events = client.watch(job_id=job.id)
        pending = asyncio.ensure_future(anext(events))
        await asyncio.sleep(0.5)  # subscribed, nothing heard yet
        server.stop()
        server.start()
        async with AsyncClient(server.url, worker_key) as worker:
            [claimed] = await worker.claim(types=["email"])
            await worker.complete(claimed.id)
        first = await asyncio.wait_for(pending, 30)
        second = await asyncio.wait_for(anext(events), 30)
        await events.aclose()
    assert [(e.previous_status, e.status) for e in (first, second)] == [
        (JobStatus.PENDING, JobStatus.RUNNING),
        (JobStatus.RUNNING, JobStatus.COMPLETED),
    ]
