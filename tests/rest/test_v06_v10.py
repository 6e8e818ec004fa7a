"""The seed's weaknesses V-06 … V-10 over its REST routes (the GraphQL side is tests/api):
one winner per job however workers race, bounded payloads and bodies, every value bound as
a parameter, idempotency keys scoped per producer, and worker error texts sanitized and
shown to admins only."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.rest.client import admin_job, admin_view, base, call, claimed, enqueued, ok, refused
from tests.support import ADMIN_SECRET, LiveServer

RACERS = 4
LIMIT = 65_536
BODY_LIMIT = 2 * 1024 * 1024


def test_v06_racing_workers_one_winner(server: LiveServer, job_type: str) -> None:
    keys = [server.create_key("WORKER", [job_type]) for _ in range(RACERS)]
    clients = [httpx.Client(timeout=30) for _ in keys]
    barrier = threading.Barrier(RACERS)

    def race(i: int) -> httpx.Response:
        barrier.wait()
        return clients[i].post(
            base(server) + "/jobs/claim",
            json={"types": [job_type]},
            headers={"Authorization": f"Bearer {keys[i]}"},
        )

    try:
        for _ in range(5):
            job = enqueued(server, ADMIN_SECRET, type=job_type)
            with ThreadPoolExecutor(RACERS) as pool:
                answers = list(pool.map(race, range(RACERS)))
            assert sorted(r.status_code for r in answers) == [200] + [204] * (RACERS - 1)
            (won,) = [r.json() for r in answers if r.status_code == 200]
            assert won["id"] == job["id"]
            assert admin_job(server, job["id"])["worker_id"] == won["worker_id"]
    finally:
        for c in clients:
            c.close()


def _payload(size: int) -> dict[str, str]:
    """A JSON object whose compact serialization is exactly `size` bytes."""
    payload = {"k": "a" * (size - len('{"k":""}'))}
    assert len(json.dumps(payload, separators=(",", ":")).encode()) == size
    return payload


def test_v07_payload_and_result_limit_is_64_kib(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    for payload in (_payload(LIMIT + 1), {"k": "a" * 1_000_000}):
        resp = call(server, "POST", "/jobs", producer, {"type": job_type, "payload": payload})
        assert refused(resp, 413, "PAYLOAD_TOO_LARGE")["field"] == ["payload"]
    assert admin_view(server, job_type) == []
    exact = _payload(LIMIT)
    assert enqueued(server, producer, type=job_type, payload=exact)["payload"] == exact

    worker = server.create_key("WORKER", [job_type])
    job = claimed(server, worker, [job_type])
    assert job is not None
    before = admin_view(server, job_type)
    resp = call(
        server, "POST", f"/jobs/{job['id']}/complete", worker, {"result": _payload(LIMIT + 1)}
    )
    assert refused(resp, 413, "PAYLOAD_TOO_LARGE")["field"] == ["result"]
    assert admin_view(server, job_type) == before
    done = ok(call(server, "POST", f"/jobs/{job['id']}/complete", worker, {"result": exact}))
    assert done["result"] == exact


@pytest.mark.parametrize("transfer", ["content-length", "chunked"])
def test_v07_request_body_over_2_mib_is_413(
    server: LiveServer, job_type: str, transfer: str
) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    body = json.dumps({"type": job_type, "payload": {"k": "x" * (BODY_LIMIT + 10)}}).encode()

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(body), 64 * 1024):
            yield body[i : i + 64 * 1024]

    content: Any = body if transfer == "content-length" else chunks()
    headers = {"content-type": "application/json"}
    resp = call(server, "POST", "/jobs", producer, content=content, headers=headers)
    assert ("transfer-encoding" in resp.request.headers) == (transfer == "chunked")
    out = refused(resp, 413, "PAYLOAD_TOO_LARGE")
    assert str(BODY_LIMIT) in out["message"]
    assert admin_view(server, job_type) == []


INJECTIONS = [
    "'; DROP TABLE jobs; --",
    '" OR 1=1 --',
    "1); DELETE FROM api_keys; --",
    "Robert'); DROP TABLE job_events;--",
    "' UNION SELECT name FROM api_keys --",
    "%_\\ $1 :name ? ::text /* */",
]


def test_v08_values_are_stored_literally(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    worker = server.create_key("WORKER", [job_type])
    for text in INJECTIONS:
        job = enqueued(server, producer, type=job_type, payload={text: text}, idempotency_key=text)
        assert job["payload"] == {text: text} and job["idempotency_key"] == text
        assert admin_job(server, job["id"])["payload"] == {text: text}
        got = claimed(server, worker, [job_type])
        assert got is not None and got["id"] == job["id"]
        failed = ok(
            call(
                server,
                "POST",
                f"/jobs/{job['id']}/fail",
                worker,
                {"error": text, "retryable": False},
            )
        )
        assert failed["status"] == "failed"
        assert admin_job(server, job["id"])["error"] == text
        # In the query string and the path, the same text matches nothing and breaks nothing.
        page = call(server, "GET", "/jobs", ADMIN_SECRET, params={"type": text})
        assert ok(page)["jobs"] == []
        refused(
            call(server, "GET", "/jobs", ADMIN_SECRET, params={"after": text}),
            422,
            "VALIDATION_FAILED",
        )
        refused(
            call(server, "GET", "/jobs", ADMIN_SECRET, params={"status": text}),
            422,
            "BAD_USER_INPUT",
        )
        refused(
            call(server, "GET", "/jobs/" + httpx.URL(text).path.lstrip("/"), ADMIN_SECRET),
            404,
            "NOT_FOUND",
        )
    assert len(admin_view(server, job_type)) == len(INJECTIONS)
    keys = server.gql("{ apiKeys { name } }", key=ADMIN_SECRET)["apiKeys"]
    assert "admin" in {k["name"] for k in keys}


def test_v09_idempotency_keys_are_per_producer(server: LiveServer, job_type: str) -> None:
    alice = server.create_key("PRODUCER", [job_type])
    original = enqueued(
        server, alice, type=job_type, payload={"to": "alice"}, idempotency_key="order-42"
    )
    before = admin_job(server, original["id"])
    # Mallory probes with Alice's key: gets a job of her own, learns nothing of Alice's.
    for payload in ({"to": "alice"}, {"to": "mallory"}):
        mallory = server.create_key("PRODUCER", [job_type])
        job = enqueued(server, mallory, type=job_type, payload=payload, idempotency_key="order-42")
        assert job["id"] != original["id"] and job["payload"] == payload
        refused(call(server, "GET", f"/jobs/{original['id']}", mallory), 404, "NOT_FOUND")
        assert [j["id"] for j in ok(call(server, "GET", "/jobs", mallory))["jobs"]] == [job["id"]]
    assert admin_job(server, original["id"]) == before
    # Alice again: the same request is the same job (200); another request is refused (409).
    body = {"type": job_type, "payload": {"to": "alice"}, "idempotency_key": "order-42"}
    assert ok(call(server, "POST", "/jobs", alice, body), 200)["id"] == original["id"]
    body["payload"] = {"to": "eve"}
    out = refused(call(server, "POST", "/jobs", alice, body), 409, "IDEMPOTENCY_KEY_REUSED")
    assert out["field"] == ["idempotency_key"]
    assert admin_job(server, original["id"]) == before
    # Only its producer and admins read the key; the worker that holds the job does not.
    worker = server.create_key("WORKER", [job_type])
    held = [claimed(server, worker, [job_type]) for _ in range(3)]
    assert all(j is not None and j["idempotency_key"] is None for j in held)


SECRETS = {
    "dsn": ("connection to postgresql://app:hunter2@db:5432/prod failed", "hunter2"),
    "bearer": (
        "sent 'Authorization: Bearer sk9f8a7d6s5a4d3f2g1h' upstream",
        "sk9f8a7d6s5a4d3f2g1h",
    ),
    "password": ("login failed for user=mailer password=Pa55w0rd! host=smtp", "Pa55w0rd!"),
}


def test_v10_errors_sanitized_and_shown_to_admins_only(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    worker = server.create_key("WORKER", [job_type])
    viewer = server.create_key("VIEWER")
    for what, (error, secret) in SECRETS.items():
        job = enqueued(server, producer, type=job_type, max_retries=0)
        assert claimed(server, worker, [job_type]) is not None
        failed = ok(call(server, "POST", f"/jobs/{job['id']}/fail", worker, {"error": error}))
        assert failed["status"] == "failed" and failed["error"] is None, what
        for reader in (ADMIN_SECRET, viewer):
            stored = ok(call(server, "GET", f"/jobs/{job['id']}", reader))["error"]
            assert secret not in stored and "[REDACTED]" in stored, (what, stored)
        for key in (producer, worker):
            assert ok(call(server, "GET", f"/jobs/{job['id']}", key))["error"] is None
            listed = ok(call(server, "GET", "/jobs?status=failed", key))["jobs"]
            assert job["id"] in {j["id"] for j in listed}
            assert all(j["error"] is None for j in listed)
    job = enqueued(server, producer, type=job_type, max_retries=0)
    assert claimed(server, worker, [job_type]) is not None
    ok(
        call(
            server,
            "POST",
            f"/jobs/{job['id']}/fail",
            worker,
            {"error": "Traceback line\n" * 20_000},
        )
    )
    stored = admin_job(server, job["id"])["error"]
    assert 100 < len(stored) <= 2_000 and stored.endswith("[truncated]")
