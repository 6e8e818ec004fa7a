"""Leases: how long a claim holds and heartbeats through the HTTP API; the rules that depend
on time on the service's injectable clock; and, end to end on a live server with real leases,
rescue by the maintenance loop (no claim needed) and the crash drill of a worker that
disappears."""

from __future__ import annotations

import pytest

from queuelog.runtime import Services
from queuelog.service.errors import DomainError
from queuelog.service.jobs import JobService
from queuelog.service.models import Actor, EnqueueRequest, Status
from tests.production.conftest import DEFAULT_LEASE
from tests.production.helpers import (
    COMPLETE,
    FAIL,
    HEARTBEAT,
    Keys,
    seconds,
    transitions,
    wait_for,
)
from tests.support import Clock, LiveServer


@pytest.fixture
def service(services: Services, clock: Clock) -> JobService:
    """The server's JobService on the test's database, on the test's clock."""
    services.service.clock = clock
    return services.service


def test_lease_from_claim_then_type_then_server(prod: LiveServer, job_type: str) -> None:
    keys = Keys.make(prod, job_type)
    keys.enqueue()
    keys.enqueue()
    asked = keys.claim(lease=30)
    assert asked is not None
    assert seconds(asked["leaseExpiresAt"], asked["claimedAt"]) == 30
    default = keys.claim()
    assert default is not None
    assert seconds(default["leaseExpiresAt"], default["claimedAt"]) == DEFAULT_LEASE

    leasy = Keys.make(prod, "leasy")  # lease_seconds = 7 in the TOML file
    leasy.enqueue()
    typed = leasy.claim()
    assert typed is not None
    assert seconds(typed["leaseExpiresAt"], typed["claimedAt"]) == 7


def test_heartbeat_extends_the_lease(prod: LiveServer, job_type: str) -> None:
    keys = Keys.make(prod, job_type)
    job = keys.enqueue()
    held = keys.claim(lease=2)
    assert held is not None and held["id"] == job["id"]
    beat = keys.call(HEARTBEAT, id=job["id"], lease=60)
    assert beat["userErrors"] == []
    assert seconds(beat["job"]["leaseExpiresAt"], beat["job"]["updatedAt"]) == 60
    beat = keys.call(HEARTBEAT, id=job["id"])  # no leaseSeconds: the type's (server) default
    assert seconds(beat["job"]["leaseExpiresAt"], beat["job"]["updatedAt"]) == DEFAULT_LEASE
    # Another worker may not heartbeat it: to that worker, the job does not exist.
    other = keys.call(HEARTBEAT, keys.worker2, id=job["id"], lease=60)
    assert [e["code"] for e in other["userErrors"]] == ["NOT_FOUND"]


async def test_heartbeats_keep_a_job_past_its_first_lease(
    service: JobService, clock: Clock, producer: Actor, worker: Actor
) -> None:
    job, _ = await service.enqueue(producer, EnqueueRequest(type="email"))
    await service.claim(worker, ["email"], 1, 1)
    for _ in range(4):  # 2 s of work under 1 s leases, each renewed in time
        await service.heartbeat(worker, job.id, 1)
        clock.advance(0.5)
    assert await service.rescue_expired() == 0
    done = await service.complete(worker, job.id, {"ok": 1})
    assert done.status is Status.COMPLETED and done.retry_count == 0


def test_maintenance_rescues_an_expired_lease_without_any_claim(
    prod: LiveServer, job_type: str
) -> None:
    keys = Keys.make(prod, job_type)
    job = keys.enqueue(maxRetries=1)
    keys.claim(lease=1)
    # Nobody claims: only the server's maintenance loop can give the job back.
    rescued = wait_for(lambda: (j := keys.job(job["id"]))["status"] == "PENDING" and j, 5)
    assert rescued["error"] == "lease expired"
    assert rescued["retryCount"] == 1
    assert rescued["leaseExpiresAt"] is None and rescued["finishedAt"] is None
    # An expired lease is a failed attempt: it waits out the backoff (server: 0.1 s base).
    assert 0 <= seconds(rescued["runAt"], rescued["updatedAt"]) <= 0.1
    assert transitions(rescued)[-1] == ("RUNNING", "PENDING")

    # A second expiry exhausts the retries (FAILED, for good): the service tests show it on
    # the clock.


def test_crash_drill_worker_disappears_and_completes_late(prod: LiveServer, job_type: str) -> None:
    keys = Keys.make(prod, job_type)
    job = keys.enqueue(payload={"n": 1})
    first = keys.claim(lease=2)  # ...and the worker process dies.
    assert first is not None

    # Before the lease ends the second worker gets nothing; after, it gets the job.
    assert keys.claim(keys.worker2) is None
    second = wait_for(lambda: keys.claim(keys.worker2), 5)
    assert second["id"] == job["id"] and second["retryCount"] == 1

    # The first worker comes back: whatever it says changes nothing.
    for op, args in (
        (COMPLETE, {"result": {"from": "ghost"}}),
        (FAIL, {"error": "late", "retryable": False}),
        (HEARTBEAT, {"lease": 60}),
    ):
        late = keys.call(op, id=job["id"], **args)
        assert [e["code"] for e in late["userErrors"]] == ["NOT_JOB_OWNER"], late
        assert late["job"] is None
    assert keys.job(job["id"])["workerId"] == second["workerId"]

    done = keys.call(COMPLETE, keys.worker2, id=job["id"], result={"from": "second"})
    assert done["userErrors"] == []
    final = keys.job(job["id"])
    assert final["status"] == "COMPLETED" and final["result"] == {"from": "second"}
    assert transitions(final) == [
        (None, "PENDING"),
        ("PENDING", "RUNNING"),
        ("RUNNING", "PENDING"),
        ("PENDING", "RUNNING"),
        ("RUNNING", "COMPLETED"),
    ]
    # Late again, after completion: still the first worker's answer is NOT_JOB_OWNER.
    late = keys.call(COMPLETE, id=job["id"], result={"from": "ghost"})
    assert [e["code"] for e in late["userErrors"]] == ["NOT_JOB_OWNER"]
    assert keys.job(job["id"])["result"] == {"from": "second"}


async def test_expired_but_not_yet_rescued_lease_is_no_longer_held(
    service: JobService, clock: Clock, producer: Actor, worker: Actor, admin: Actor
) -> None:
    job, _ = await service.enqueue(producer, EnqueueRequest(type="email"))
    await service.claim(worker, ["email"], 1, 1)
    clock.advance(1)  # the lease has ended; no maintenance pass has run
    with pytest.raises(DomainError) as late:
        await service.complete(worker, job.id, {})
    assert late.value.code == "NOT_JOB_OWNER"
    held = await service.get(admin, job.id)
    assert held is not None and held.status is Status.RUNNING
