"""Cancel and retry, results, and batches, through the HTTP API."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from queuelog.runtime import Services
from queuelog.service import errors
from queuelog.service.models import Actor, EnqueueRequest, Role
from queuelog.storage.tx import Tx
from tests.production.helpers import (
    CANCEL,
    CLAIM_MANY,
    COMPLETE,
    ENQUEUE_MANY,
    FAIL,
    HEARTBEAT,
    RETRY,
    Keys,
    transitions,
)
from tests.support import ADMIN_SECRET, LiveServer


def _codes(payload: dict[str, Any]) -> list[str]:
    return [e["code"] for e in payload["userErrors"]]


def test_producer_cancels_a_running_job_and_the_holder_learns_it(
    prod: LiveServer, job_type: str
) -> None:
    keys = Keys.make(prod, job_type)
    job = keys.enqueue()
    keys.claim(lease=60)
    cancelled = keys.call(CANCEL, keys.producer, id=job["id"])
    assert cancelled["userErrors"] == [] and cancelled["job"]["status"] == "CANCELLED"

    beat = keys.call(HEARTBEAT, id=job["id"], lease=60)
    assert _codes(beat) == ["INVALID_STATE"]
    assert beat["job"]["status"] == "CANCELLED"  # the holder sees why it should stop
    for op, args in ((COMPLETE, {"result": {"x": 1}}), (FAIL, {"error": "e"})):
        out = keys.call(op, id=job["id"], **args)
        assert _codes(out) == ["INVALID_STATE"], out
    final = keys.job(job["id"])
    assert final["status"] == "CANCELLED" and final["result"] is None
    assert final["leaseExpiresAt"] is None and final["finishedAt"] is not None
    assert transitions(final)[-1] == ("RUNNING", "CANCELLED")


def test_cancel_rules(prod: LiveServer, job_type: str) -> None:
    keys = Keys.make(prod, job_type)
    stranger = prod.create_key("PRODUCER", [job_type])
    pending = keys.enqueue()
    # Another producer cannot see, so cannot cancel, this job; a worker may not cancel.
    assert _codes(keys.call(CANCEL, stranger, id=pending["id"])) == ["NOT_FOUND"]
    forbidden = prod.post(CANCEL, {"id": pending["id"]}, keys.worker).json()
    assert forbidden["errors"][0]["extensions"]["code"] == "FORBIDDEN"
    assert keys.job(pending["id"])["status"] == "PENDING"

    assert keys.call(CANCEL, keys.producer, id=pending["id"])["job"]["status"] == "CANCELLED"
    again = keys.call(CANCEL, keys.producer, id=pending["id"])
    assert _codes(again) == ["INVALID_STATE"]
    assert keys.claim() is None  # a cancelled job is never claimed

    other = keys.enqueue()
    assert keys.call(CANCEL, ADMIN_SECRET, id=other["id"])["job"]["status"] == "CANCELLED"


def test_admin_retries_failed_and_cancelled_jobs(prod: LiveServer, job_type: str) -> None:
    keys = Keys.make(prod, job_type)
    failed = keys.enqueue(maxRetries=3)
    keys.claim()
    keys.call(FAIL, id=failed["id"], error="no", retryable=False)
    cancelled = keys.enqueue()
    keys.call(CANCEL, keys.producer, id=cancelled["id"])
    pending = keys.enqueue()

    forbidden = prod.post(RETRY, {"id": failed["id"]}, keys.producer).json()
    assert forbidden["errors"][0]["extensions"]["code"] == "FORBIDDEN"
    assert _codes(keys.call(RETRY, ADMIN_SECRET, id=pending["id"])) == ["INVALID_STATE"]
    for job in (failed, cancelled):
        out = keys.call(RETRY, ADMIN_SECRET, id=job["id"])
        assert out["userErrors"] == []
        assert out["job"]["status"] == "PENDING" and out["job"]["retryCount"] == 0
        assert out["job"]["finishedAt"] is None
    claimed = {keys.claim()["id"] for _ in range(3)}  # type: ignore[index]
    assert claimed == {failed["id"], cancelled["id"], pending["id"]}


def test_complete_stores_a_result_within_the_payload_limit(prod: LiveServer, job_type: str) -> None:
    keys = Keys.make(prod, job_type)
    job = keys.enqueue()
    keys.claim()
    too_big = keys.call(COMPLETE, id=job["id"], result={"blob": "x" * 70_000})
    assert _codes(too_big) == ["PAYLOAD_TOO_LARGE"]
    assert too_big["userErrors"][0]["field"] == ["result"]
    assert keys.job(job["id"])["status"] == "RUNNING"
    result = {"pages": 3, "nested": {"ok": True, "list": [1, "two", None]}}
    done = keys.call(COMPLETE, id=job["id"], result=result)
    assert done["userErrors"] == [] and done["job"]["result"] == result
    assert keys.job(job["id"])["result"] == result


def _inputs(job_type: str, n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"type": job_type, "payload": {"i": i}, **extra} for i in range(n)]


def test_enqueue_jobs_is_all_or_nothing(prod: LiveServer, job_type: str) -> None:
    keys = Keys.make(prod, job_type)
    for n in (0, 501):
        out = keys.call(ENQUEUE_MANY, keys.producer, inputs=_inputs(job_type, n))
        assert _codes(out) == ["VALIDATION_FAILED"] and out["jobs"] == []
    bad = _inputs(job_type, 5)
    bad[3]["priority"] = "CRITICAL"  # above the key's maxPriority
    out = keys.call(ENQUEUE_MANY, keys.producer, inputs=bad)
    assert _codes(out) == ["PRIORITY_NOT_ALLOWED"] and out["jobs"] == []
    assert out["userErrors"][0]["field"] == ["inputs", "3", "priority"]
    assert keys.stats()["pending"] == 0

    out = keys.call(ENQUEUE_MANY, keys.producer, inputs=_inputs(job_type, 500))
    assert out["userErrors"] == [] and len(out["jobs"]) == 500
    assert [j["type"] for j in out["jobs"]] == [job_type] * 500
    assert keys.stats()["pending"] == 500


def test_enqueue_jobs_idempotency_per_input(prod: LiveServer, job_type: str) -> None:
    keys = Keys.make(prod, job_type)
    first = keys.call(
        ENQUEUE_MANY, keys.producer, inputs=_inputs(job_type, 1, idempotencyKey="k-0")
    )["jobs"][0]
    batch = [
        {"type": job_type, "payload": {"i": 0}, "idempotencyKey": "k-0"},  # a repeat
        {"type": job_type, "payload": {"i": 1}, "idempotencyKey": "k-1"},
        {"type": job_type, "payload": {"i": 2}},
    ]
    out = keys.call(ENQUEUE_MANY, keys.producer, inputs=batch)
    assert out["userErrors"] == []
    assert out["jobs"][0]["id"] == first["id"]
    assert len({j["id"] for j in out["jobs"]}) == 3
    assert keys.stats()["pending"] == 3

    # The same key with a different request: the whole batch is refused.
    reused = [
        {"type": job_type, "payload": {"i": 9}},
        {"type": job_type, "payload": {"i": 99}, "idempotencyKey": "k-1"},
    ]
    out = keys.call(ENQUEUE_MANY, keys.producer, inputs=reused)
    assert _codes(out) == ["IDEMPOTENCY_KEY_REUSED"]
    assert out["userErrors"][0]["field"] == ["inputs", "1", "idempotencyKey"]
    assert keys.stats()["pending"] == 3


def test_claim_jobs_takes_the_most_urgent_up_to_the_limit(prod: LiveServer, job_type: str) -> None:
    keys = Keys.make(prod, job_type)
    for n in (0, 101):
        out = keys.call(CLAIM_MANY, limit=n, types=[job_type])
        assert _codes(out) == ["VALIDATION_FAILED"] and out["jobs"] == []
    urgent = keys.enqueue(priority="MEDIUM")
    keys.call(ENQUEUE_MANY, keys.producer, inputs=_inputs(job_type, 150))
    out = keys.call(CLAIM_MANY, limit=100, types=[job_type], lease=30)
    assert len(out["jobs"]) == 100 and out["jobs"][0]["id"] == urgent["id"]
    assert {j["status"] for j in out["jobs"]} == {"RUNNING"}
    rest = keys.call(CLAIM_MANY, keys.worker2, limit=100, types=[job_type])["jobs"]
    assert len(rest) == 51
    assert not {j["id"] for j in out["jobs"]} & {j["id"] for j in rest}
    assert keys.stats() == {
        "pending": 0,
        "running": 151,
        "completed": 0,
        "failed": 0,
        "cancelled": 0,
    }


def _kind(statement: str) -> str:
    """A statement's first three words, upper-cased; the events' INSERT, whatever CTE (the
    event-order lock, on PostgreSQL) comes before it, as "INSERT INTO JOB_EVENTS", and
    PostgreSQL's jobs INSERT that appends their events too as "INSERT INTO JOBS+JOB_EVENTS"."""
    words = statement.split()
    text = " ".join(words)
    if words[0].upper() == "WITH" and "INSERT INTO job_events" in text:
        both = "INSERT INTO jobs" in text
        return "INSERT INTO JOBS+JOB_EVENTS" if both else "INSERT INTO JOB_EVENTS"
    return " ".join(words[:3]).upper()


class _Counted:
    """A driver cursor that notes each statement it runs (executemany runs its statement
    once per parameter row)."""

    def __init__(self, cursor: Any, seen: list[str]) -> None:
        self._cursor, self._seen = cursor, seen

    def execute(self, statement: str, *args: Any, **kw: Any) -> Any:
        self._seen.append(_kind(statement))
        return self._cursor.execute(statement, *args, **kw)

    def executemany(self, statement: str, rows: Any, *args: Any, **kw: Any) -> Any:
        rows = list(rows)
        self._seen.extend([_kind(statement)] * len(rows))
        return self._cursor.executemany(statement, rows, *args, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


def _statements(services: Services, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kinds of the statements the writer sends from now on (Core's and the driver's)."""
    seen: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        seen.append(_kind(statement))

    sa.event.listen(services.db.writer, "before_cursor_execute", count)
    driver_cursor = Tx.driver_cursor

    def counted_cursor(tx: Tx) -> Any:
        if tx.cursor is None:
            tx.cursor = _Counted(driver_cursor(tx), seen)
        return tx.cursor

    monkeypatch.setattr(Tx, "driver_cursor", counted_cursor)
    return seen


async def test_batches_take_one_statement_each(
    services: Services, producer: Actor, worker: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """enqueueJobs and claimJobs cost a fixed number of statements, not one per job."""
    seen = _statements(services, monkeypatch)

    def req(i: int) -> EnqueueRequest:
        if i % 2 == 0:
            return EnqueueRequest(type="email", payload={"i": i})
        key = f"k{i % 200}"  # 100 keys, each given more than once, with the same request
        return EnqueueRequest(type="email", payload={"key": key}, idempotency_key=key)

    reqs = [req(i) for i in range(500)]
    jobs = await services.service.enqueue_many(producer, reqs)
    assert len(jobs) == 500 and len({j.id for j in jobs}) == 250 + 100
    assert jobs[1].id == jobs[401].id  # the key k1 is repeated: one job
    inserts = [s for s in seen if s.startswith("INSERT INTO JOBS")]
    assert len(inserts) == 2, seen  # the plain rows, then the keyed rows
    assert sum(s.startswith("SELECT") for s in seen) <= 1
    # 350 events in one statement: a batch that inserts twice appends its events at commit.
    assert sum("JOB_EVENTS" in s for s in seen) == 1, seen

    seen.clear()
    claimed = await services.service.claim(worker, ["email"], 60, 100)
    assert len(claimed) == 100
    assert sum(s.startswith("INSERT INTO JOB_EVENTS") for s in seen) == 1, seen
    # One claim statement (SQLite: UPDATE ... WHERE id IN (SELECT ...); PostgreSQL: a CTE).
    assert sum(s.startswith(("UPDATE JOBS", "WITH CHOSEN")) for s in seen) == 1, seen


async def test_complete_is_one_statement_on_jobs(
    services: Services, producer: Actor, worker: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A complete is a compare-and-set alone: the row is read only to explain a refusal."""
    await services.service.enqueue_many(producer, [EnqueueRequest(type="email")] * 2)
    first, second = await services.service.claim(worker, ["email"], 60, 2)
    seen = _statements(services, monkeypatch)
    done = await services.service.complete(worker, first.id, {"ok": True})
    assert done.status.value == "completed" and done.result == {"ok": True}
    # Besides the event and (SQLite) the job counts the transaction appends at its end.
    bookkeeping = ("INSERT INTO JOB_EVENTS", "INSERT INTO JOB_COUNTS")
    assert [s for s in seen if s not in bookkeeping] == ["UPDATE JOBS SET"], seen

    other = Actor("another-worker", Role.WORKER)
    with pytest.raises(errors.NotFound, match=f"no job {second.id}"):
        await services.service.complete(other, second.id, None)
    # Its worker repeating the complete (the answer may have been lost) hears it again.
    again = await services.service.complete(worker, first.id, None)
    assert again.status.value == "completed" and again.result == {"ok": True}


async def test_claims_batched_together_share_one_rescue(
    services: Services, producer: Actor, worker: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lease rescue a claim runs first is done once per transaction, however many
    claims the writer batched into it."""
    service = services.service
    await service.enqueue_many(producer, [EnqueueRequest(type="email")] * 3)
    rescues: list[Any] = []
    rescue = service._rescue

    def counted(tx: Tx, now: Any) -> Any:
        rescues.append(now)
        return rescue(tx, now)

    monkeypatch.setattr(service, "_rescue", counted)
    claimed = services.db.write_sync(
        lambda tx: [service._claim(tx, worker.name, ["email"], None, 1) for _ in range(3)]
    )
    assert [len(jobs) for _, jobs in claimed] == [1, 1, 1]
    assert len({job.id for _, jobs in claimed for job in jobs}) == 3
    assert len(rescues) == 1
