"""V-05: anyone settles any job. Only the worker holding a live lease may complete, fail or
heartbeat a job; a worker that held it hears NOT_JOB_OWNER, one that never did NOT_FOUND, an
admin INVALID_STATE (FORBIDDEN for a producer), and the job is left exactly as it was."""

from __future__ import annotations

import asyncio
from typing import Any

from queuelog.runtime import Services
from tests.api.attack import (
    COMPLETE,
    FAIL,
    HEARTBEAT,
    JOB,
    claim,
    enqueued,
    snapshot,
    top_level_codes,
)
from tests.support import ADMIN_SECRET, Clock, LiveServer

ATTEMPTS = [
    ("completeJob", COMPLETE, {"result": {"forged": True}}),
    ("failJob", FAIL, {"error": "sabotage", "retryable": False}),
    ("heartbeatJob", HEARTBEAT, {}),
]


def _held(server: LiveServer, job_type: str, lease: int | None = None) -> tuple[str, str]:
    """A job of `job_type` claimed by a fresh worker; returns (job id, worker key)."""
    worker = server.create_key("WORKER", [job_type])
    job = enqueued(server, ADMIN_SECRET, type=job_type)
    claimed = claim(server, worker, [job_type], lease)["job"]
    assert claimed["id"] == job["id"]
    return job["id"], worker


def _attempt(server: LiveServer, key: str, doc: str, job_id: str, extra: dict[str, Any]) -> Any:
    return server.post(doc, {"id": job_id, **extra}, key).json()


def test_v05_other_worker_cannot_settle(server: LiveServer, job_type: str) -> None:
    job_id, holder = _held(server, job_type)
    intruder = server.create_key("WORKER", [job_type])
    before = snapshot(server, job_type)
    for name, doc, extra in ATTEMPTS:
        body = _attempt(server, intruder, doc, job_id, extra)
        payload = body["data"][name]
        assert payload["userErrors"][0]["code"] == "NOT_FOUND", (name, body)
        assert payload["userErrors"][0]["field"] == ["id"]
        assert payload["job"] is None, "the intruder learns nothing about the job"
    assert snapshot(server, job_type) == before
    # The holder still can.
    done = server.gql(COMPLETE, {"id": job_id, "result": {"ok": 1}}, holder)["completeJob"]
    assert done["userErrors"] == [] and done["job"]["status"] == "COMPLETED"


def test_v05_producer_cannot_settle(server: LiveServer, job_type: str) -> None:
    job_id, _holder = _held(server, job_type)
    producer = server.create_key("PRODUCER", [job_type])
    before = snapshot(server, job_type)
    for _name, doc, extra in ATTEMPTS:
        body = _attempt(server, producer, doc, job_id, extra)
        assert top_level_codes(body) == ["FORBIDDEN"], body
    assert snapshot(server, job_type) == before


def test_v05_admin_cannot_settle_a_job_a_worker_holds(server: LiveServer, job_type: str) -> None:
    job_id, _holder = _held(server, job_type)
    before = snapshot(server, job_type)
    for name, doc, extra in ATTEMPTS:
        payload = _attempt(server, ADMIN_SECRET, doc, job_id, extra)["data"][name]
        assert [e["code"] for e in payload["userErrors"]] == ["INVALID_STATE"], (name, payload)
    assert snapshot(server, job_type) == before


def test_v05_unclaimed_job_cannot_be_settled(server: LiveServer, job_type: str) -> None:
    worker = server.create_key("WORKER", [job_type])
    job = enqueued(server, ADMIN_SECRET, type=job_type)
    before = snapshot(server, job_type)
    for name, doc, extra in ATTEMPTS:
        payload = _attempt(server, worker, doc, job["id"], extra)["data"][name]
        # The worker never held it, so for this worker the job does not exist.
        assert [e["code"] for e in payload["userErrors"]] == ["NOT_FOUND"], (name, payload)
        assert payload["job"] is None
    for missing in ("999999999", "-1", "abc", "1 OR 1=1"):
        payload = _attempt(server, worker, COMPLETE, missing, {})["data"]["completeJob"]
        assert [e["code"] for e in payload["userErrors"]] == ["NOT_FOUND"], (missing, payload)
    assert snapshot(server, job_type) == before


async def test_v05_expired_lease_is_not_ownership(
    live: tuple[LiveServer, str], services: Services, clock: Clock
) -> None:
    """On a server whose clock the test moves: the lease has run out, no rescue has run."""
    server, admin = live
    services.service.clock = clock

    def over_http() -> None:
        worker = server.create_key("WORKER", ["email"])
        job = enqueued(server, admin, type="email")
        assert claim(server, worker, ["email"], 1)["job"]["id"] == job["id"]
        clock.advance(1)
        for name, doc, extra in ATTEMPTS:
            payload = _attempt(server, worker, doc, job["id"], extra)["data"][name]
            assert [e["code"] for e in payload["userErrors"]] == ["NOT_JOB_OWNER"], (name, payload)
        now = server.gql(JOB, {"id": job["id"]}, admin)["job"]
        # The server may have given the job back to the queue meanwhile; it was never settled
        # by the worker whose lease ran out.
        assert now["status"] in ("RUNNING", "PENDING"), now
        assert now["result"] is None
        assert now["error"] in (None, "lease expired"), now

    await asyncio.to_thread(over_http)


def test_v05_other_producer_cannot_cancel_or_see(server: LiveServer, job_type: str) -> None:
    owner = server.create_key("PRODUCER", [job_type])
    other = server.create_key("PRODUCER", [job_type])
    job = enqueued(server, owner, type=job_type)
    before = snapshot(server, job_type)
    out = server.gql(
        "mutation($id: ID!) { cancelJob(id: $id) { job { id } userErrors { code field } } }",
        {"id": job["id"]},
        other,
    )["cancelJob"]
    # Indistinguishable from a job that does not exist.
    assert out == {"job": None, "userErrors": [{"code": "NOT_FOUND", "field": ["id"]}]}
    assert server.gql(JOB, {"id": job["id"]}, other) == {"job": None}
    seen = server.gql(
        """query($t: String!) { jobs(type: $t) { totalCount }
             queueStats(type: $t) { pending } }""",
        {"t": job_type},
        other,
    )
    assert seen == {"jobs": {"totalCount": 0}, "queueStats": {"pending": 0}}
    assert snapshot(server, job_type) == before
