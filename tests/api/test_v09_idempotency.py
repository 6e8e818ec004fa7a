"""V-09: idempotency probing. Keys are scoped per producer: another producer's key reveals
nothing and touches nothing; the same producer reusing a key for a different request gets
IDEMPOTENCY_KEY_REUSED; only the producer and admins ever read a key."""

from __future__ import annotations

from tests.api.attack import JOB, admin_job, claim, codes, enqueue, enqueued, snapshot
from tests.support import LiveServer

KEY = "order-42"


def test_v09_other_producer_gets_its_own_job(server: LiveServer, job_type: str) -> None:
    alice = server.create_key("PRODUCER", [job_type])
    original = enqueued(server, alice, type=job_type, payload={"to": "alice"}, idempotencyKey=KEY)
    before = admin_job(server, original["id"])

    # Mallory probes with Alice's key: with the same request, and with a different one.
    for payload in ({"to": "alice"}, {"to": "mallory"}):
        mallory = server.create_key("PRODUCER", [job_type])
        out = enqueue(server, mallory, type=job_type, payload=payload, idempotencyKey=KEY)
        assert out["userErrors"] == [] and out["created"] is True, out
        job = out["job"]
        assert job["id"] != original["id"]
        assert job["payload"] == payload and job["idempotencyKey"] == KEY
        assert job["producer"] != original["producer"]
        assert server.gql(JOB, {"id": original["id"]}, mallory) == {"job": None}
        mine = server.gql("{ jobs { totalCount nodes { id } } }", key=mallory)["jobs"]
        assert mine == {"totalCount": 1, "nodes": [{"id": job["id"]}]}
    assert admin_job(server, original["id"]) == before
    # Alice's key still finds her own job.
    again = enqueue(server, alice, type=job_type, payload={"to": "alice"}, idempotencyKey=KEY)
    assert again["created"] is False and again["job"]["id"] == original["id"]


def test_v09_same_producer_same_key_different_request(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type], max_priority="HIGH")
    first = enqueued(server, producer, type=job_type, payload={"n": 1}, idempotencyKey=KEY)
    before = snapshot(server, job_type)
    for change in ({"payload": {"n": 2}}, {"priority": "HIGH"}, {"maxRetries": 7}):
        request = {"type": job_type, "payload": {"n": 1}, "idempotencyKey": KEY, **change}
        out = enqueue(server, producer, **request)
        assert out["job"] is None and out["created"] is False, out
        assert codes(out) == ["IDEMPOTENCY_KEY_REUSED"]
        assert out["userErrors"][0]["field"] == ["input", "idempotencyKey"]
    assert snapshot(server, job_type) == before
    same = enqueue(server, producer, type=job_type, payload={"n": 1}, idempotencyKey=KEY)
    assert same["userErrors"] == [] and same["created"] is False
    assert same["job"] == first
    assert snapshot(server, job_type) == before


def test_v09_key_visible_only_to_its_producer_and_admins(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    worker = server.create_key("WORKER", [job_type])
    job = enqueued(server, producer, type=job_type, idempotencyKey=KEY)
    assert job["idempotencyKey"] == KEY
    assert admin_job(server, job["id"])["idempotencyKey"] == KEY

    claimed = claim(server, worker, [job_type])["job"]
    assert claimed["id"] == job["id"] and claimed["idempotencyKey"] is None
    seen = server.gql(JOB, {"id": job["id"]}, worker)["job"]
    assert seen is not None and seen["idempotencyKey"] is None
    listed = server.gql("{ jobs { nodes { id idempotencyKey } } }", key=worker)["jobs"]["nodes"]
    assert {"id": job["id"], "idempotencyKey": None} in listed
    assert server.gql(JOB, {"id": job["id"]}, producer)["job"]["idempotencyKey"] == KEY
