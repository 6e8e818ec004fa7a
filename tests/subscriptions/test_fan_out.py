"""One status change fanned out to hundreds of subscribers that show the job: the server
reads the job once for them all, and each is shown the job as of its event or newer.

In-process server (`inprocess.live`) so that the reads can be counted; real WebSocket
clients."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import pytest
from graphql import ExecutionResult, OperationDefinitionNode, parse
from graphql.execution.executor import Executor as GraphQLExecutor

from queuelog.api.fastpath.executor import SharedEvents
from queuelog.api.types.jobs import JobEvent
from queuelog.runtime import Services
from queuelog.service.models import Actor, EnqueueRequest, Role
from queuelog.storage import jobs as jobs_sql
from tests.inprocess import until
from tests.subscriptions.wsclient import WS, ws
from tests.support import LiveServer

CONNECTIONS, PER_CONNECTION = 10, 30  # 300 subscriptions
SHOWING_THE_JOB = """subscription($type: String) {
  jobStatusChanged(type: $type) { cursor status job { id status } }
}"""
EVENT_ONLY = "subscription($type: String) { jobStatusChanged(type: $type) { status } }"
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


@pytest.fixture
def executions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The event ids of the subscription events graphql-core executes."""
    seen: list[int] = []
    real = GraphQLExecutor.execute_operation

    def execute_operation(self: GraphQLExecutor, *a: Any, **k: Any) -> Any:
        if isinstance(self.root_value, JobEvent):
            seen.append(self.root_value.event_id)
        return real(self, *a, **k)

    monkeypatch.setattr(GraphQLExecutor, "execute_operation", execute_operation)
    return seen


@pytest.mark.parametrize("query", [SHOWING_THE_JOB, EVENT_ONLY], ids=["with job", "event only"])
async def test_subscribers_that_ask_alike_share_one_execution_per_event(
    live: tuple[LiveServer, str], services: Services, executions: list[int], query: str
) -> None:
    server, key = live
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(ws(server, key)) for _ in range(3)]
        for client in clients:
            for _ in range(20):
                await client.subscribe({"type": "email"}, query)
        await until(lambda: services.feed.followers == 60)
        job, _ = await services.service.enqueue(PRODUCER, EnqueueRequest("email"))
        await services.service.claim(WORKER, ["email"], None)
        payloads = [m["payload"] for c in clients for m in await c.take(2 * 20)]
    assert all("errors" not in p for p in payloads), payloads
    changes = [p["data"]["jobStatusChanged"] for p in payloads]
    assert sorted(c["status"] for c in changes) == ["PENDING"] * 60 + ["RUNNING"] * 60
    if query is SHOWING_THE_JOB:
        assert {c["job"]["id"] for c in changes} == {str(job.id)}
    # 120 deliveries of two changes: two executions (one per change), not 120.
    assert len(executions) == 2 and len(set(executions)) == 2, executions


async def test_what_differs_by_actor_operation_or_variables_is_not_shared(
    live: tuple[LiveServer, str], services: Services
) -> None:
    server, admin = live
    _, producer = await services.keys.create("p", Role.PRODUCER)
    shows_error = "subscription($t: String) { jobStatusChanged(type: $t) { status job { error } } }"
    cursor_only = "subscription($t: String) { jobStatusChanged(type: $t) { cursor } }"
    history = """subscription($t: String, $n: Int) {
      jobStatusChanged(type: $t) { job { events(first: $n) { status } } } }"""
    seen: dict[tuple[str, str], list[dict[str, Any]]] = {}
    async with ws(server, admin) as a, ws(server, producer) as p:
        ops = {
            "admin": ("a", await a.subscribe({"t": "email"}, shows_error)),
            "admin, cursor only": ("a", await a.subscribe({"t": "email"}, cursor_only)),
            "admin, no type": ("a", await a.subscribe({"t": None}, shows_error)),
            "history of 1": ("a", await a.subscribe({"t": "email", "n": 1}, history)),
            "history of 3": ("a", await a.subscribe({"t": "email", "n": 3}, history)),
            "producer": ("p", await p.subscribe({"t": "email"}, shows_error)),
        }
        await until(lambda: services.feed.followers == 6)
        job, _ = await services.service.enqueue(PRODUCER, EnqueueRequest("email", max_retries=0))
        await services.service.claim(WORKER, ["email"], None)
        await services.service.fail(WORKER, job.id, "boom: secret detail", retryable=False)
        for name, client in (("a", a), ("p", p)):
            for message in await client.take(3 * sum(1 for c, _ in ops.values() if c == name)):
                assert "errors" not in message["payload"], message
                change = message["payload"]["data"]["jobStatusChanged"]
                seen.setdefault((name, message["id"]), []).append(change)
    last = {who: seen[op][-1] for who, op in ops.items()}
    # The admin is shown the worker's error, the producer not (V-10), whichever came first;
    # other variables bring the same change; another operation gets its own shape.
    assert last["admin"] == {"status": "FAILED", "job": {"error": "boom: secret detail"}}
    assert last["admin, no type"] == last["admin"]
    assert last["producer"] == {"status": "FAILED", "job": {"error": None}}
    assert all(set(c) == {"cursor"} for c in seen[ops["admin, cursor only"]])
    assert len(last["history of 1"]["job"]["events"]) == 1
    assert len(last["history of 3"]["job"]["events"]) == 3


def _operation(query: str) -> OperationDefinitionNode:
    operation = parse(query).definitions[0]
    assert isinstance(operation, OperationDefinitionNode)
    return operation


GROUP = (1, b"{}", WORKER)


def test_shared_results_are_bounded_in_bytes_and_never_another_operation_s() -> None:
    shared = SharedEvents(max_bytes=1_000)
    operation = _operation("subscription { jobStatusChanged { cursor } }")
    other = _operation("subscription { jobStatusChanged { status } }")
    for _ in range(3):
        shared.join(GROUP)
    for event_id in range(30):  # ~100 bytes each
        shared.put((*GROUP, event_id), operation, ExecutionResult({"n": "x" * 90}))
    assert 0 < shared.bytes <= 1_000
    assert shared.get((*GROUP, 0), operation) is None  # the oldest are gone
    kept = shared.get((*GROUP, 29), operation)
    assert isinstance(kept, ExecutionResult) and kept.data == {"n": "x" * 90}
    # An entry is only ever the result of its own operation, whatever its key says.
    assert shared.get((*GROUP, 28), other) is None
    # A result larger than the whole bound is never kept.
    shared.put((*GROUP, 30), operation, ExecutionResult({"n": "x" * 2_000}))
    assert shared.get((*GROUP, 30), operation) is None


def test_a_shared_result_is_released_once_every_subscriber_has_it() -> None:
    shared = SharedEvents()
    operation = _operation("subscription { jobStatusChanged { cursor } }")
    for _ in range(3):
        shared.join(GROUP)
    shared.put((*GROUP, 1), operation, ExecutionResult({"n": 1}))  # the first subscriber's
    assert shared.get((*GROUP, 1), operation) is not None  # the second's
    assert len(shared) == 1
    assert shared.get((*GROUP, 1), operation) is not None  # the third's: nobody else needs it
    assert len(shared) == 0 and shared.bytes == 0


def test_shared_results_go_with_the_last_subscriber_of_their_group() -> None:
    shared = SharedEvents()
    operation = _operation("subscription { jobStatusChanged { cursor } }")
    shared.join(GROUP)
    shared.put((*GROUP, 1), operation, ExecutionResult({"n": 1}))
    assert len(shared) == 0  # a lone subscriber shares with nobody
    shared.join(GROUP)
    shared.put((*GROUP, 2), operation, ExecutionResult({"n": 2}))
    assert len(shared) == 1
    shared.leave(GROUP)
    shared.leave(GROUP)
    assert len(shared) == 0 and shared.bytes == 0
