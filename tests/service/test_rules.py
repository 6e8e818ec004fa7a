"""The rules of JobService, on SQLite and PostgreSQL, with a clock the test moves."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from queuelog.service import errors
from queuelog.service.backoff import backoff_seconds
from queuelog.service.jobs import JobService
from queuelog.service.models import Actor, EnqueueRequest, Job, Priority, Role, Status
from tests.service.conftest import snapshot
from tests.support import T0, Clock

P1 = Actor("producer-1", Role.PRODUCER)
P2 = Actor("producer-2", Role.PRODUCER)
BOSS = Actor("boss", Role.PRODUCER, max_priority=Priority.CRITICAL)
W1 = Actor("worker-1", Role.WORKER)
W2 = Actor("worker-2", Role.WORKER)
ADMIN = Actor("admin", Role.ADMIN, max_priority=Priority.CRITICAL)
LEASE = 300  # the default lease, in seconds


async def enqueue(svc: JobService, actor: Actor = P1, **kw: Any) -> Job:
    kw.setdefault("type", "email")
    job, created = await svc.enqueue(actor, EnqueueRequest(**kw))
    assert created
    return job


async def claim_one(svc: JobService, worker: Actor = W1, **kw: Any) -> Job:
    got = await svc.claim(worker, kw.pop("types", None), kw.pop("lease", None), **kw)
    assert len(got) == 1, got
    return got[0]


async def history(svc: JobService, job_id: int) -> list[tuple[str | None, str]]:
    return [
        (None if e.previous_status is None else e.previous_status.value, e.status.value)
        for e in await svc.history(job_id, 100)
    ]


async def refused(code: str, call: Any) -> errors.DomainError:
    with pytest.raises(errors.DomainError) as info:
        await call
    assert info.value.code == code, info.value.message
    return info.value


# -- priorities and claim order ---------------------------------------------------------------


def test_priority_labels_are_0_10_20_30() -> None:
    assert {p.name: int(p) for p in Priority} == {
        "LOW": 0,
        "MEDIUM": 10,
        "HIGH": 20,
        "CRITICAL": 30,
    }


async def test_priority_is_stored_as_its_number(svc: JobService) -> None:
    from queuelog.storage import jobs as jobs_sql

    for p in Priority:
        job = await enqueue(svc, BOSS, priority=p)
        row = await svc.db.read(jobs_sql.get, job.id)
        assert row is not None and row.priority == int(p) and job.priority is p


async def test_claim_takes_highest_priority_then_oldest_then_lowest_id(
    svc: JobService, clock: Clock
) -> None:
    high_later = await enqueue(svc, BOSS, priority=Priority.HIGH, delay_seconds=10)
    high_older = await enqueue(svc, BOSS, priority=Priority.HIGH)  # higher id, older run_at
    low = await enqueue(svc, BOSS, priority=Priority.LOW)
    crit = await enqueue(svc, BOSS, priority=Priority.CRITICAL, delay_seconds=10)
    high_tie = await enqueue(svc, BOSS, priority=Priority.HIGH, delay_seconds=10)
    later = await enqueue(svc, BOSS, priority=Priority.CRITICAL, delay_seconds=60)
    clock.advance(10)
    order = [(await claim_one(svc)).id for _ in range(5)]
    assert order == [crit.id, high_older.id, high_later.id, high_tie.id, low.id]
    assert await svc.claim(W1, None, None) == []  # `later` is not due
    clock.advance(50)
    assert (await claim_one(svc)).id == later.id


async def test_claim_sets_holder_and_lease(svc: JobService) -> None:
    job = await enqueue(svc)
    got = await claim_one(svc, lease=42)
    assert got.id == job.id and got.status is Status.RUNNING
    assert (got.worker_id, got.claimed_at) == (W1.name, T0)
    assert got.lease_expires_at == T0 + timedelta(seconds=42)
    await enqueue(svc)
    default = await claim_one(svc)
    assert default.lease_expires_at == T0 + timedelta(seconds=LEASE)


async def test_claim_many_is_bounded_and_checks_its_types(svc: JobService) -> None:
    for limit in (0, 101):
        e = await refused("VALIDATION_FAILED", svc.claim(W1, None, None, limit))
        assert e.field == ["limit"]
    for lease in (0, 86_401):
        e = await refused("VALIDATION_FAILED", svc.claim(W1, None, lease))
        assert e.field == ["leaseSeconds"]
    e = await refused("JOB_TYPE_NOT_ALLOWED", svc.claim(W1, ["nope"], None))
    assert e.field == ["types"]
    only_pdf = Actor("pdf-worker", Role.WORKER, allowed_types=("pdf",))
    await refused("JOB_TYPE_NOT_ALLOWED", svc.claim(only_pdf, ["email"], None))

    for _ in range(3):
        await enqueue(svc)
    assert await svc.claim(only_pdf, None, None, 100) == []  # its types only
    assert len(await svc.claim(W1, ["email"], None, 2)) == 2
    assert len(await svc.claim(W1, None, None, 100)) == 1


# Which role may call which operation is checked at the GraphQL edge, for every root field
# and role: tests/api/test_v01_auth.py::test_v01_wrong_role_forbidden.


# -- fail, retry and backoff ------------------------------------------------------------------


async def test_fail_with_retries_left_goes_back_to_pending_after_a_backoff(
    svc: JobService, clock: Clock
) -> None:
    job = await enqueue(svc, max_retries=2)
    await claim_one(svc)
    clock.advance(5)
    failed, retried = await svc.fail(W1, job.id, "smtp timeout")
    expected_delay = backoff_seconds(0, 1.0, 3600.0, random.Random(0))
    assert retried is True
    assert failed.status is Status.PENDING and failed.retry_count == 1
    assert (failed.claimed_at, failed.lease_expires_at) == (None, None)
    assert failed.run_at == clock.now + timedelta(seconds=expected_delay)
    assert failed.error is None and failed.finished_at is None  # error texts: admins only
    stored = await svc.get(ADMIN, job.id)
    assert stored is not None and stored.error == "smtp timeout"
    assert await history(svc, job.id) == [
        (None, "pending"),
        ("pending", "running"),
        ("running", "pending"),
    ]


async def test_backoff_base_zero_retries_at_once(
    make_service: Callable[..., JobService], clock: Clock
) -> None:
    svc = make_service(backoff_base_seconds=0)
    job = await enqueue(svc, max_retries=1)
    await claim_one(svc)
    failed, _ = await svc.fail(W1, job.id, "boom")
    assert failed.run_at == clock.now
    again = await claim_one(svc, W2)
    assert again.id == job.id and again.retry_count == 1


async def test_fail_with_retries_exhausted_is_final(
    make_service: Callable[..., JobService], clock: Clock
) -> None:
    svc = make_service(backoff_base_seconds=0)
    job = await enqueue(svc, max_retries=1)
    await claim_one(svc)
    await svc.fail(W1, job.id, "first")
    await claim_one(svc)
    clock.advance(3)
    final, retried = await svc.fail(W1, job.id, "second")
    assert retried is False
    assert final.status is Status.FAILED and final.retry_count == 1
    assert final.finished_at == clock.now and final.lease_expires_at is None
    stored = await svc.get(ADMIN, job.id)
    assert stored is not None and stored.error == "second"
    assert await svc.claim(W1, None, None) == []


async def test_fail_not_retryable_is_final_at_once(svc: JobService) -> None:
    job = await enqueue(svc, max_retries=5)
    await claim_one(svc)
    final, retried = await svc.fail(W1, job.id, "bad address", retryable=False)
    assert retried is False and final.status is Status.FAILED and final.retry_count == 0


async def test_fail_stores_the_error_sanitized(svc: JobService) -> None:
    job = await enqueue(svc, max_retries=0)
    await claim_one(svc)
    await svc.fail(W1, job.id, "connect postgresql://app:hunter2@db/x failed\x00")
    final = await svc.get(ADMIN, job.id)
    assert final is not None and final.error is not None
    assert "hunter2" not in final.error and "\x00" not in final.error
    assert "[REDACTED]" in final.error


async def test_complete_refuses_a_result_over_the_limit_and_keeps_the_job(svc: JobService) -> None:
    job = await enqueue(svc)
    await claim_one(svc)
    before = snapshot(svc.db)
    e = await refused("PAYLOAD_TOO_LARGE", svc.complete(W1, job.id, TOO_BIG))
    assert e.field == ["result"]
    e = await refused("VALIDATION_FAILED", svc.complete(W1, job.id, {1: "not JSON"}))
    assert e.field == ["result"]
    assert snapshot(svc.db) == before
    done = await svc.complete(W1, job.id, {"ok": [1, 2]})
    assert done.result == {"ok": [1, 2]} and done.status is Status.COMPLETED


# -- who may settle a job ---------------------------------------------------------------------


async def test_settling_a_job_not_running_is_invalid_state(svc: JobService) -> None:
    job = await enqueue(svc)
    await claim_one(svc)
    await svc.complete(W1, job.id, {"ok": True})
    # Its worker repeating the completeJob (the answer may have been lost) hears it again.
    again = await svc.complete(W1, job.id, None)
    assert (again.status, again.result) == (Status.COMPLETED, {"ok": True})
    for call in (svc.fail(W1, job.id, "late"), svc.heartbeat(W1, job.id, None)):
        e = await refused("INVALID_STATE", call)
        assert e.job is not None and e.job.status is Status.COMPLETED
    pending = await enqueue(svc)
    await refused("INVALID_STATE", svc.complete(ADMIN, pending.id, None))


async def test_a_worker_whose_lease_expired_is_not_the_owner(svc: JobService, clock: Clock) -> None:
    job = await enqueue(svc)
    await claim_one(svc, lease=30)
    clock.advance(30)  # the lease ends at exactly T0 + 30 s
    before = snapshot(svc.db)
    for call in (
        svc.complete(W1, job.id, None),
        svc.fail(W1, job.id, "late"),
        svc.heartbeat(W1, job.id, None),
    ):
        await refused("NOT_JOB_OWNER", call)
    assert snapshot(svc.db) == before

    clock.advance(1)
    assert await svc.rescue_expired() == 1  # back to PENDING, retries left
    await refused("NOT_JOB_OWNER", svc.complete(W1, job.id, None))

    clock.advance(3600)  # past any backoff
    assert (await claim_one(svc, W2)).id == job.id
    await refused("NOT_JOB_OWNER", svc.complete(W1, job.id, None))
    await refused("NOT_JOB_OWNER", svc.heartbeat(W1, job.id, None))
    done = await svc.complete(W2, job.id, None)
    assert done.status is Status.COMPLETED and done.worker_id == W2.name
    await refused("NOT_JOB_OWNER", svc.fail(W1, job.id, "late"))  # it was W1's once


async def test_a_worker_whose_job_failed_on_lease_expiry_is_not_the_owner(
    svc: JobService, clock: Clock
) -> None:
    job = await enqueue(svc, max_retries=0)
    await claim_one(svc, lease=10)
    clock.advance(11)
    assert await svc.rescue_expired() == 1
    e = await refused("NOT_JOB_OWNER", svc.complete(W1, job.id, None))
    assert e.field == ["id"]


async def test_another_worker_cannot_settle_a_held_job(svc: JobService) -> None:
    """A worker that never held the job is told it does not exist (not that someone else
    runs it); an admin, who may see it, is told it is not its to settle."""
    job = await enqueue(svc)
    await claim_one(svc, W1)
    before = snapshot(svc.db)
    for call in (
        svc.complete(W2, job.id, {"stolen": True}),
        svc.fail(W2, job.id, "x"),
        svc.heartbeat(W2, job.id, None),
    ):
        e = await refused("NOT_FOUND", call)
        assert e.job is None and e.message == f"no job {job.id}"
    e = await refused("INVALID_STATE", svc.complete(ADMIN, job.id, None))
    assert e.job is not None and e.job.id == job.id
    assert snapshot(svc.db) == before


async def test_an_invisible_job_is_not_found(svc: JobService) -> None:
    job = await enqueue(svc)
    for call in (
        svc.complete(W1, job.id, None),  # pending, never held by W1
        svc.complete(W1, 10_000, None),
        svc.fail(W1, 10_000, "x"),
        svc.heartbeat(W1, 10_000, None),
        svc.cancel(P1, 10_000),
        svc.retry(ADMIN, 10_000),
    ):
        e = await refused("NOT_FOUND", call)
        assert e.field == ["id"] and e.job is None
    await claim_one(svc, W2)
    await svc.complete(W2, job.id, None)
    await refused("NOT_FOUND", svc.complete(W1, job.id, None))  # done, and never W1's


async def test_heartbeat_extends_the_lease(svc: JobService, clock: Clock) -> None:
    job = await enqueue(svc)
    await claim_one(svc, lease=30)
    clock.advance(20)
    beat = await svc.heartbeat(W1, job.id, 120)
    assert beat.lease_expires_at == clock.now + timedelta(seconds=120)
    clock.advance(100)  # past the first lease, within the second
    assert (await svc.complete(W1, job.id, None)).status is Status.COMPLETED
    await refused("VALIDATION_FAILED", svc.heartbeat(W1, job.id, 0))


# -- cancel and retry -------------------------------------------------------------------------


async def test_cancel_by_the_producer_of_the_job(svc: JobService, clock: Clock) -> None:
    job = await enqueue(svc, P1)
    await refused("NOT_FOUND", svc.cancel(P2, job.id))
    clock.advance(2)
    cancelled = await svc.cancel(P1, job.id)
    assert cancelled.status is Status.CANCELLED and cancelled.finished_at == clock.now
    e = await refused("INVALID_STATE", svc.cancel(P1, job.id))
    assert e.job is not None and e.job.status is Status.CANCELLED

    done = await enqueue(svc, P1)
    await claim_one(svc)
    await svc.complete(W1, done.id, None)
    await refused("INVALID_STATE", svc.cancel(P1, done.id))
    assert await history(svc, job.id) == [(None, "pending"), ("pending", "cancelled")]


async def test_the_holder_of_a_cancelled_job_hears_invalid_state_with_the_job(
    svc: JobService,
) -> None:
    job = await enqueue(svc, P1)
    await claim_one(svc)
    await svc.cancel(P1, job.id)
    before = snapshot(svc.db)
    for call in (
        svc.complete(W1, job.id, None),
        svc.fail(W1, job.id, "x"),
        svc.heartbeat(W1, job.id, None),
    ):
        e = await refused("INVALID_STATE", call)
        assert e.job is not None and e.job.id == job.id and e.job.status is Status.CANCELLED
    assert snapshot(svc.db) == before
    assert await history(svc, job.id) == [
        (None, "pending"),
        ("pending", "running"),
        ("running", "cancelled"),
    ]


async def test_retry_restarts_a_finished_job(svc: JobService, clock: Clock) -> None:
    failed = await enqueue(svc, max_retries=0)
    await claim_one(svc)
    await svc.fail(W1, failed.id, "x")
    cancelled = await enqueue(svc)
    await svc.cancel(P1, cancelled.id)
    clock.advance(10)
    for job in (failed, cancelled):
        again = await svc.retry(ADMIN, job.id)
        assert again.status is Status.PENDING and again.retry_count == 0
        assert again.run_at == clock.now and again.finished_at is None
    e = await refused("INVALID_STATE", svc.retry(ADMIN, failed.id))
    assert e.job is not None and e.job.status is Status.PENDING
    assert (await history(svc, failed.id))[-1] == ("failed", "pending")
    assert (await claim_one(svc)).id == failed.id


# -- idempotency ------------------------------------------------------------------------------


async def test_idempotency_key_returns_the_same_job(svc: JobService) -> None:
    req = EnqueueRequest(type="email", payload={"to": "a"}, idempotency_key="k-1")
    first, created = await svc.enqueue(P1, req)
    assert created is True and first.idempotency_key == "k-1"
    before = snapshot(svc.db)
    again, created = await svc.enqueue(P1, req)
    assert created is False and again.id == first.id
    assert snapshot(svc.db) == before

    different = EnqueueRequest(type="email", payload={"to": "b"}, idempotency_key="k-1")
    e = await refused("IDEMPOTENCY_KEY_REUSED", svc.enqueue(P1, different))
    assert e.field == ["input", "idempotencyKey"]
    assert snapshot(svc.db) == before

    other, created = await svc.enqueue(P2, different)  # keys are scoped per producer
    assert created is True and other.id != first.id


# -- enqueue validation: the right error, the right field, nothing changed --------------------

TOO_BIG = {"x": "a" * 65_536}
INVALID: list[tuple[str, Actor, dict[str, Any], str, list[str]]] = [
    ("unknown type", P1, {"type": "nope"}, "JOB_TYPE_NOT_ALLOWED", ["type"]),
    (
        "type outside the key's allowedTypes",
        Actor("pdf-only", Role.PRODUCER, allowed_types=("pdf",)),
        {"type": "email"},
        "JOB_TYPE_NOT_ALLOWED",
        ["type"],
    ),
    ("payload a list", P1, {"payload": [1, 2]}, "VALIDATION_FAILED", ["payload"]),
    ("payload a string", P1, {"payload": "hi"}, "VALIDATION_FAILED", ["payload"]),
    ("payload not JSON", P1, {"payload": {1: "a"}}, "VALIDATION_FAILED", ["payload"]),
    ("payload over 64 KiB", P1, {"payload": TOO_BIG}, "PAYLOAD_TOO_LARGE", ["payload"]),
    ("priority over max", P1, {"priority": Priority.HIGH}, "PRIORITY_NOT_ALLOWED", ["priority"]),
    ("maxRetries negative", P1, {"max_retries": -1}, "VALIDATION_FAILED", ["maxRetries"]),
    ("maxRetries over 25", P1, {"max_retries": 26}, "VALIDATION_FAILED", ["maxRetries"]),
    ("key empty", P1, {"idempotency_key": ""}, "VALIDATION_FAILED", ["idempotencyKey"]),
    ("key too long", P1, {"idempotency_key": "k" * 256}, "VALIDATION_FAILED", ["idempotencyKey"]),
    ("key unprintable", P1, {"idempotency_key": "a\nb"}, "VALIDATION_FAILED", ["idempotencyKey"]),
    (
        "runAt and delaySeconds",
        P1,
        {"run_at": T0, "delay_seconds": 5},
        "VALIDATION_FAILED",
        ["delaySeconds"],
    ),
    ("runAt far past", P1, {"run_at": T0 - timedelta(days=2)}, "VALIDATION_FAILED", ["runAt"]),
    (
        "runAt past horizon",
        P1,
        {"run_at": T0 + timedelta(days=366)},
        "VALIDATION_FAILED",
        ["runAt"],
    ),
    ("runAt naive", P1, {"run_at": T0.replace(tzinfo=None)}, "VALIDATION_FAILED", ["runAt"]),
    ("delaySeconds negative", P1, {"delay_seconds": -1}, "VALIDATION_FAILED", ["delaySeconds"]),
    (
        "delaySeconds past horizon",
        P1,
        {"delay_seconds": 366 * 86_400},
        "VALIDATION_FAILED",
        ["delaySeconds"],
    ),
]


async def test_bad_enqueue_is_refused_and_changes_nothing(svc: JobService) -> None:
    await enqueue(svc)  # something to leave unchanged
    before = snapshot(svc.db)
    for case, actor, fields, code, field in INVALID:
        req = EnqueueRequest(**{"type": "email", **fields})
        with pytest.raises(errors.DomainError) as info:
            await svc.enqueue(actor, req)
        assert (info.value.code, info.value.field) == (code, ["input", *field]), case
        assert snapshot(svc.db) == before, case


async def test_enqueue_accepts_the_limits_themselves(svc: JobService, clock: Clock) -> None:
    at_limit = {"x": "a" * (65_536 - len('{"x":""}'))}
    assert (await enqueue(svc, payload=at_limit)).payload == at_limit
    assert (await enqueue(svc, max_retries=0)).max_retries == 0
    assert (await enqueue(svc, max_retries=25)).max_retries == 25
    assert (await enqueue(svc, idempotency_key="k" * 255)).idempotency_key == "k" * 255
    assert (await enqueue(svc, priority=Priority.MEDIUM)).priority is Priority.MEDIUM
    recent = await enqueue(svc, run_at=T0 - timedelta(minutes=30))
    assert recent.run_at == clock.now  # a recent past time counts as now
    assert (await enqueue(svc, delay_seconds=90)).run_at == T0 + timedelta(seconds=90)
    assert (await enqueue(svc, payload=None)).payload == {}


async def test_enqueue_many_is_all_or_nothing(svc: JobService) -> None:
    await enqueue(svc)
    before = snapshot(svc.db)
    reqs = [EnqueueRequest(type="email", payload={"n": i}) for i in range(5)]
    bad = [*reqs[:3], EnqueueRequest(type="email", payload=[3]), reqs[4]]
    e = await refused("VALIDATION_FAILED", svc.enqueue_many(P1, bad))
    assert e.field == ["inputs", "3", "payload"]
    assert snapshot(svc.db) == before

    # A reused idempotency key found inside the transaction rolls back the rows before it.
    await svc.enqueue(P1, EnqueueRequest(type="email", idempotency_key="dup"))
    before = snapshot(svc.db)
    clash = [*reqs[:2], EnqueueRequest(type="email", payload={"x": 1}, idempotency_key="dup")]
    e = await refused("IDEMPOTENCY_KEY_REUSED", svc.enqueue_many(P1, clash))
    assert e.field == ["inputs", "2", "idempotencyKey"]
    assert snapshot(svc.db) == before

    for n in (0, 501):
        e = await refused("VALIDATION_FAILED", svc.enqueue_many(P1, reqs[:1] * n))
        assert e.field == ["inputs"]

    same = EnqueueRequest(type="email", idempotency_key="dup")
    made = await svc.enqueue_many(P1, [*reqs, same])
    assert [j.payload for j in made[:5]] == [{"n": i} for i in range(5)]
    assert made[5].idempotency_key == "dup"  # the existing job, in input order


# -- visibility -------------------------------------------------------------------------------


async def test_each_role_sees_only_its_jobs(svc: JobService) -> None:
    mine = await enqueue(svc, P1)
    theirs = await enqueue(svc, P2)
    await enqueue(svc, P2)
    await claim_one(svc, W1)  # holds `mine` (lowest id)

    async def ids(actor: Actor) -> list[int]:
        page = await svc.page(actor, status=None, job_type=None, first=100, after=None)
        return [j.id for j in page.jobs]

    assert await svc.get(P1, mine.id) is not None
    assert await svc.get(P1, theirs.id) is None
    assert await svc.get(W1, mine.id) is not None
    assert await svc.get(W2, mine.id) is None
    assert await svc.get(W1, theirs.id) is None
    assert await svc.get(ADMIN, theirs.id) is not None
    assert await ids(P1) == [mine.id]
    assert len(await ids(P2)) == 2
    assert await ids(W1) == [mine.id]
    assert await ids(W2) == []
    assert len(await ids(ADMIN)) == 3

    assert (await svc.counts(P1, None))["running"] == 1
    assert (await svc.counts(P2, None))["pending"] == 2
    assert sum((await svc.counts(W2, None)).values()) == 0
    assert (await svc.counts(ADMIN, None)) == {
        "pending": 2,
        "running": 1,
        "completed": 0,
        "failed": 0,
        "cancelled": 0,
    }


async def test_page_cursor_and_bounds(svc: JobService) -> None:
    made = [await enqueue(svc) for _ in range(5)]
    first = await svc.page(P1, status=None, job_type=None, first=2, after=None)
    assert [j.id for j in first.jobs] == [made[4].id, made[3].id]
    assert first.has_next and first.total == 5
    rest = await svc.page(P1, status=None, job_type=None, first=10, after=str(made[3].id))
    assert [j.id for j in rest.jobs] == [j.id for j in reversed(made[:3])]
    assert not rest.has_next
    for bad in (0, 101):
        e = await refused(
            "VALIDATION_FAILED", svc.page(P1, status=None, job_type=None, first=bad, after=None)
        )
        assert e.field == ["first"]
    # Not digits, non-ASCII digits, or past the 64-bit ids: a clear error, not a crash.
    for cursor in ("x", "-1", "²", "9" * 19):
        e = await refused(
            "VALIDATION_FAILED", svc.page(P1, status=None, job_type=None, first=1, after=cursor)
        )
        assert e.field == ["after"]
    big = await svc.page(P1, status=None, job_type=None, first=1, after="9" * 18)
    assert [j.id for j in big.jobs] == [made[4].id]


# -- expired leases ---------------------------------------------------------------------------


async def test_rescue_expired_returns_jobs_or_fails_them(svc: JobService, clock: Clock) -> None:
    retry = await enqueue(svc, max_retries=1)
    final = await enqueue(svc, max_retries=0)
    live = await enqueue(svc)
    await claim_one(svc, lease=10)
    await claim_one(svc, lease=10)
    await claim_one(svc, lease=100)
    clock.advance(10)
    assert await svc.rescue_expired() == 0  # a lease ending now has not yet expired
    clock.advance(1)
    assert await svc.rescue_expired() == 2
    back = await svc.get(ADMIN, retry.id)
    assert back is not None and back.status is Status.PENDING
    assert (back.retry_count, back.error, back.lease_expires_at) == (1, "lease expired", None)
    gone = await svc.get(ADMIN, final.id)
    assert gone is not None and gone.status is Status.FAILED
    assert (gone.error, gone.finished_at) == ("lease expired", clock.now)
    kept = await svc.get(ADMIN, live.id)
    assert kept is not None and kept.status is Status.RUNNING
    assert (await history(svc, retry.id))[-1] == ("running", "pending")
    assert (await history(svc, final.id))[-1] == ("running", "failed")
    assert await svc.rescue_expired() == 0


async def test_claim_rescues_expired_leases_first(
    make_service: Callable[..., JobService], clock: Clock
) -> None:
    svc = make_service(backoff_base_seconds=0)
    job = await enqueue(svc)
    await claim_one(svc, W1, lease=5)
    clock.advance(6)
    again = await claim_one(svc, W2)
    assert again.id == job.id and again.retry_count == 1 and again.worker_id == W2.name


# -- history ----------------------------------------------------------------------------------


async def test_history_follows_a_job_through_its_life(
    make_service: Callable[..., JobService], clock: Clock
) -> None:
    svc = make_service(backoff_base_seconds=0)
    job = await enqueue(svc, max_retries=1)
    await claim_one(svc)
    await svc.heartbeat(W1, job.id, None)  # no status change, no event
    await svc.fail(W1, job.id, "once")
    clock.advance(1)
    await claim_one(svc, W2)
    await svc.complete(W2, job.id, {"done": 1})
    events = await svc.history(job.id, 100)
    assert [(e.previous_status, e.status) for e in events] == [
        (None, Status.PENDING),
        (Status.PENDING, Status.RUNNING),
        (Status.RUNNING, Status.PENDING),
        (Status.PENDING, Status.RUNNING),
        (Status.RUNNING, Status.COMPLETED),
    ]
    assert [e.worker_id for e in events][3:] == [W2.name, W2.name]
    assert events[-1].occurred_at == clock.now
    assert [e.id for e in events] == sorted(e.id for e in events)
    assert len(await svc.history(job.id, 2)) == 2
    await refused("VALIDATION_FAILED", svc.history(job.id, 0))
