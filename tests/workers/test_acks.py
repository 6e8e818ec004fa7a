"""A worker's outcomes sent several to a request: one refused outcome does not hide the
others', a retried request repeats the same outcomes, and a server whose query limits
refuse a batch gets them one at a time. Live servers on both backends."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from queuelog.client import AsyncClient, ConnectionFailed, JobStatus, Settlement
from queuelog.client.operations import Features
from queuelog.worker import RunningJob, Worker
from tests.support import LiveServer
from tests.workers.conftest import Keys
from tests.workers.helpers import history, settled, until, working

ONCE = [(None, "PENDING"), ("PENDING", "RUNNING"), ("RUNNING", "COMPLETED")]
Sent = list[list[tuple[str, bool, Any]]]


def recording(monkeypatch: pytest.MonkeyPatch, lose_first_answer: bool = False) -> Sent:
    """Record every batch of outcomes the worker sends, alone or carried by a claim;
    optionally lose the answer to the first one after the server took it (the worker must
    send it again)."""
    sent: Sent = []
    report, report_and_claim = AsyncClient.report, AsyncClient.report_and_claim

    def record(settlements: list[Settlement]) -> None:
        sent.append([(s.job_id, s.completed, s.result) for s in settlements])

    async def settle_recorded(self: AsyncClient, settlements: list[Settlement]) -> Any:
        record(settlements)
        answers = await report(self, settlements)
        if lose_first_answer and len(sent) == 1:
            raise ConnectionFailed("the answer was lost")
        return answers

    async def carried_recorded(
        self: AsyncClient, settlements: list[Settlement], *args: Any, **kw: Any
    ) -> Any:
        record(settlements)
        answers = await report_and_claim(self, settlements, *args, **kw)
        if lose_first_answer and len(sent) == 1:
            raise ConnectionFailed("the answer was lost")
        return answers

    monkeypatch.setattr(AsyncClient, "report", settle_recorded)
    monkeypatch.setattr(AsyncClient, "report_and_claim", carried_recorded)
    return sent


def held_worker(
    url: str, key: str, job_type: str, **kw: Any
) -> tuple[Worker, set[str], asyncio.Event]:
    """A worker whose handlers all wait for `go`, then return their payload's n."""
    worker = Worker(url, key, concurrency=4, **kw)
    started: set[str] = set()
    go = asyncio.Event()

    @worker.handler(job_type)
    async def work(job: RunningJob) -> Any:
        started.add(job.id)
        await go.wait()
        return {"n": job.payload["n"]}

    return worker, started, go


async def enqueue(url: str, key: str, job_type: str, n: int) -> list[str]:
    async with AsyncClient(url, key) as client:
        jobs = await client.enqueue_many(
            [{"type": job_type, "payload": {"n": i}} for i in range(n)]
        )
    return [j.id for j in jobs]


def verdicts(caplog: pytest.LogCaptureFixture, job_id: str) -> list[str]:
    return [m for m in caplog.messages if m.startswith(f"job {job_id} ")]


async def test_a_refused_outcome_leaves_the_others_in_its_batch_theirs(
    server: LiveServer,
    keys: Keys,
    job_type: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "queuelog.worker")
    sent = recording(monkeypatch)
    worker, started, go = held_worker(server.url, keys.worker, job_type)
    ids = await enqueue(server.url, keys.producer, job_type, 4)
    async with working(worker):
        await until(lambda: len(started) == 4)
        async with AsyncClient(server.url, keys.admin) as admin:
            await admin.cancel(ids[1])
        go.set()
        jobs = await settled(server, ids, lambda j: j.status != JobStatus.RUNNING)
        await until(lambda: all(verdicts(caplog, i) for i in ids))
    assert [j.status for j in jobs] == ["COMPLETED", "CANCELLED", "COMPLETED", "COMPLETED"]
    assert [j.result for j in jobs] == [{"n": 0}, None, {"n": 2}, {"n": 3}]
    # The cancelled job's outcome went in one request with others', and was refused alone.
    assert any(ids[1] in {job_id for job_id, _, _ in batch} and len(batch) > 1 for batch in sent)
    assert [len(verdicts(caplog, i)) for i in ids] == [1, 1, 1, 1]
    assert " CANCELLED " in verdicts(caplog, ids[1])[0]
    assert all(" COMPLETED " in verdicts(caplog, i)[0] for i in (ids[0], ids[2], ids[3]))


async def test_a_batch_whose_answer_was_lost_is_sent_again_the_same(
    server: LiveServer,
    keys: Keys,
    job_type: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "queuelog.worker")
    sent = recording(monkeypatch, lose_first_answer=True)
    worker, started, go = held_worker(server.url, keys.worker, job_type)
    ids = await enqueue(server.url, keys.producer, job_type, 4)
    async with working(worker):
        await until(lambda: len(started) == 4)
        go.set()
        await settled(server, ids)
        await until(lambda: all(verdicts(caplog, i) for i in ids))
    outcomes: dict[str, set[tuple[bool, Any]]] = {}
    for batch in sent:
        for job_id, completed, result in batch:
            outcomes.setdefault(job_id, set()).add((completed, str(result)))
    assert len(sent) > 1 and all(len(o) == 1 for o in outcomes.values())  # each: one outcome
    assert history(server, ids) == {i: ONCE for i in ids}
    assert all(
        len(verdicts(caplog, i)) == 1 and " COMPLETED " in verdicts(caplog, i)[0] for i in ids
    )


async def test_a_server_that_refuses_the_batch_gets_the_outcomes_one_by_one(
    start_server: Callable[..., LiveServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server without reportJobs (the reports go as aliased fields) and a low alias limit.
    server = start_server(max_aliases=1)
    older = Features(wait_seconds=True, progress=True, report_jobs=False)
    monkeypatch.setattr(Features, "of", classmethod(lambda cls, data: older))
    monkeypatch.setattr(Features, "CURRENT", older)  # when introspection is off
    job_type = "email"
    sent = recording(monkeypatch)
    producer = server.create_key("PRODUCER", [job_type])
    worker, started, go = held_worker(server.url, server.create_key("WORKER", [job_type]), job_type)
    ids = await enqueue(server.url, producer, job_type, 4)
    async with working(worker):
        await until(lambda: len(started) == 4)
        go.set()
        jobs = await settled(server, ids)
    assert [j.result for j in jobs] == [{"n": i} for i in range(4)]
    assert any(len(batch) > 1 for batch in sent) and len(sent[-1]) == 1
    assert history(server, ids) == {i: ONCE for i in ids}


async def test_reports_ride_with_the_claim_for_the_places_they_freed(
    server: LiveServer, keys: Keys, job_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    carried: list[tuple[int, int]] = []  # (reports carried, jobs the same request claimed)
    report_and_claim = AsyncClient.report_and_claim

    async def spy(self: AsyncClient, settlements: list[Settlement], *a: Any, **kw: Any) -> Any:
        answers, jobs = await report_and_claim(self, settlements, *a, **kw)
        carried.append((len(settlements), len(jobs)))
        return answers, jobs

    monkeypatch.setattr(AsyncClient, "report_and_claim", spy)
    # One claim at a time (none ahead): no other claim takes the next jobs meanwhile.
    worker, started, go = held_worker(server.url, keys.worker, job_type, prefetch=0)
    ids = await enqueue(server.url, keys.producer, job_type, 8)
    async with working(worker):
        await until(lambda: len(started) == 4)
        go.set()
        jobs = await settled(server, ids)
    assert [j.result for j in jobs] == [{"n": i} for i in range(8)]
    # The four first reports went with the claim of the next four jobs, in one request.
    assert carried and carried[0][1] > 0 and sum(n for n, _ in carried) >= 4
    assert history(server, ids) == {i: ONCE for i in ids}
