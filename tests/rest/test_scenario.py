"""The seed's scenario over its REST routes, through a live server on both backends: a
producer enqueues (once, whatever it retries), a worker claims the most urgent job first,
completes one and fails others (retried while retries remain, else FAILED), and everyone
reads the jobs it may see."""

from __future__ import annotations

from tests.rest.client import admin_job, call, claimed, enqueued, ok, refused
from tests.support import ADMIN_SECRET, LiveServer

FIELDS = {
    "id", "type", "payload", "priority", "status", "retry_count", "max_retries",
    "idempotency_key", "claimed_at", "worker_id", "error", "created_at", "updated_at",
    "result", "run_at",
}  # fmt: skip


def test_seed_scenario(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type], max_priority="HIGH")
    worker_name = server.unique_name("rest-worker")
    worker = server.create_key("WORKER", [job_type], name=worker_name)

    # Enqueue: 201 for a new job; the same idempotency key and request again: 200, same job.
    body = {"type": job_type, "payload": {"to": "a@example.com"}, "idempotency_key": "order-1"}
    first = enqueued(server, producer, **body)
    assert set(first) == FIELDS
    assert first["status"] == "pending" and first["priority"] == "low"
    assert first["retry_count"] == 0 and first["max_retries"] == 3
    assert first["idempotency_key"] == "order-1" and first["payload"] == body["payload"]
    assert first["worker_id"] is None and first["claimed_at"] is None and first["error"] is None
    again = ok(call(server, "POST", "/jobs", producer, body), 200)
    assert again == first

    urgent = enqueued(server, producer, type=job_type, priority="high", max_retries=1)
    later = enqueued(server, producer, type=job_type, priority="high", max_retries=0)

    # Claim: highest priority first, then the oldest; the worker id is the key's name.
    held = [claimed(server, worker, [job_type], lease_seconds=120) for _ in range(3)]
    assert [j and j["id"] for j in held] == [urgent["id"], later["id"], first["id"]]
    job = held[0]
    assert job is not None and job["status"] == "running" and job["worker_id"] == worker_name
    assert job["claimed_at"] is not None

    done = ok(call(server, "POST", f"/jobs/{first['id']}/complete", worker, {"result": {"ok": 1}}))
    assert done["status"] == "completed" and done["result"] == {"ok": 1}
    # Completed and failed are final: the state machine refuses a second report.
    resp = call(server, "POST", f"/jobs/{first['id']}/fail", worker, {"error": "x"})
    refused(resp, 409, "INVALID_STATE")
    # No retries left: FAILED at once.
    failed = ok(call(server, "POST", f"/jobs/{later['id']}/fail", worker, {"error": "bad address"}))
    assert failed["status"] == "failed" and failed["retry_count"] == 0
    assert admin_job(server, later["id"])["error"] == "bad address"
    # Retryable failure with retries left: back to pending, retry_count counted.
    retried = ok(call(server, "POST", f"/jobs/{urgent['id']}/fail", worker, {"error": "smtp down"}))
    assert retried["status"] == "pending" and retried["retry_count"] == 1
    assert retried["worker_id"] == worker_name and retried["error"] is None  # admins only
    assert retried["run_at"] > job["run_at"]  # after a backoff

    # The retried job comes back after its backoff (a second or two): a waiting claim gets it.
    job = claimed(server, worker, [job_type], wait_seconds=20)
    assert job is not None and job["id"] == urgent["id"] and job["retry_count"] == 1
    retried = ok(call(server, "POST", f"/jobs/{job['id']}/fail", worker, {"error": "again"}))
    assert retried["status"] == "failed" and retried["retry_count"] == 1
    assert claimed(server, worker, [job_type]) is None  # nothing left: 204

    # Reads: the producer sees its jobs, filtered by status, newest first.
    mine = ok(call(server, "GET", "/jobs", producer))
    assert [j["id"] for j in mine["jobs"]] == [later["id"], urgent["id"], first["id"]]
    assert mine["has_next"] is False and mine["next_cursor"] is None
    failed_jobs = ok(call(server, "GET", "/jobs?status=failed", producer))["jobs"]
    assert [j["id"] for j in failed_jobs] == [later["id"], urgent["id"]]
    assert ok(call(server, "GET", "/jobs?status=pending", producer))["jobs"] == []
    page = ok(call(server, "GET", "/jobs?limit=2", producer))
    assert page["has_next"] is True and page["next_cursor"] == str(urgent["id"])
    rest = ok(call(server, "GET", f"/jobs?limit=2&after={page['next_cursor']}", producer))
    assert [j["id"] for j in rest["jobs"]] == [first["id"]]
    assert ok(call(server, "GET", f"/jobs/{first['id']}", producer))["status"] == "completed"
    # The worker sees the jobs it held, without the producer's idempotency key.
    held = ok(call(server, "GET", "/jobs", worker))["jobs"]
    assert {j["id"] for j in held} == {first["id"], urgent["id"], later["id"]}
    assert all(j["idempotency_key"] is None for j in held)


def test_claim_waits_for_a_job(server: LiveServer, job_type: str) -> None:
    """`wait_seconds`: a claim with nothing to take waits for one, else answers 204."""
    worker = server.create_key("WORKER", [job_type])
    assert claimed(server, worker, [job_type], wait_seconds=1) is None
    job = enqueued(server, ADMIN_SECRET, type=job_type)
    got = claimed(server, worker, [job_type], wait_seconds=5)
    assert got is not None and got["id"] == job["id"]
    # No body at all is a claim of every type the key may use.
    enqueued(server, ADMIN_SECRET, type=job_type)
    resp = call(server, "POST", "/jobs/claim", worker)
    assert ok(resp)["type"] == job_type


def test_rest_and_graphql_are_one_queue(server: LiveServer, job_type: str) -> None:
    """A job enqueued over REST is claimed over GraphQL, and the other way round."""
    worker = server.create_key("WORKER", [job_type])
    job = enqueued(server, ADMIN_SECRET, type=job_type, payload={"n": 1})
    out = server.gql(
        "mutation($t: [String!]) { claimJob(types: $t) { job { id payload } } }",
        {"t": [job_type]},
        worker,
    )["claimJob"]["job"]
    assert out == {"id": str(job["id"]), "payload": {"n": 1}}
    done = ok(call(server, "POST", f"/jobs/{job['id']}/complete", worker, {}))
    assert done["status"] == "completed" and done["result"] is None


def test_routes_answer_in_json(server: LiveServer) -> None:
    """A method a route does not serve, a path it does not know, a body that is not JSON:
    each is a JSON error with its code, never an HTML or plain-text page."""
    worker = server.create_key("WORKER")
    resp = call(server, "GET", "/jobs/claim", worker)
    refused(resp, 405, "METHOD_NOT_ALLOWED")
    assert resp.headers["allow"] == "POST"
    refused(call(server, "DELETE", "/jobs/1", worker), 405, "METHOD_NOT_ALLOWED")
    refused(call(server, "GET", "/jobs/1/nope", worker), 404, "NOT_FOUND")
    bad = call(
        server,
        "POST",
        "/jobs/claim",
        worker,
        content=b"{nope",
        headers={"content-type": "application/json"},
    )
    refused(bad, 400, "BAD_REQUEST")
    text = call(
        server, "POST", "/jobs/claim", worker, content=b"{}", headers={"content-type": "text/plain"}
    )
    refused(text, 415, "UNSUPPORTED_MEDIA_TYPE")
    # The query string's shape (the adapter's models), then its values (the service's rules).
    shapes = ("limit=x", "status=PENDING", "status=lost", "limit=1&limit=2", "sort=id")
    for query in shapes:
        refused(call(server, "GET", f"/jobs?{query}", worker), 422, "BAD_USER_INPUT")
    for query in ("limit=0", "limit=101", "after=x"):
        body = refused(call(server, "GET", f"/jobs?{query}", worker), 422, "VALIDATION_FAILED")
        assert body["field"] == [query.partition("=")[0]], body
