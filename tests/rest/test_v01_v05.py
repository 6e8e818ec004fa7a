"""The seed's weaknesses V-01 … V-05 over its REST routes (the GraphQL side is tests/api):
every route needs a live key and the role its operation needs; job types, priorities and
the worker's identity come from the key; only a job's holder may settle it. Every refusal
changes nothing."""

from __future__ import annotations

import time
from typing import Any

from queuelog.auth.keys import generate_secret
from tests.rest.client import admin_job, admin_view, call, claimed, enqueued, ok, refused
from tests.support import ADMIN_SECRET, LiveServer


def _routes(job_id: int, job_type: str) -> list[tuple[str, str, Any]]:
    """Each route, with a body that would do harm if it ran."""
    return [
        ("POST", "/jobs", {"type": job_type, "priority": "critical"}),
        ("GET", "/jobs", None),
        ("GET", f"/jobs/{job_id}", None),
        ("POST", "/jobs/claim", {"types": [job_type]}),
        ("POST", f"/jobs/{job_id}/complete", {"result": {"forged": True}}),
        ("POST", f"/jobs/{job_id}/fail", {"error": "forged", "retryable": False}),
    ]


def _running(server: LiveServer, job_type: str) -> tuple[int, str]:
    """A job a worker holds, and that worker's key."""
    worker = server.create_key("WORKER", [job_type])
    job = enqueued(server, ADMIN_SECRET, type=job_type)
    got = claimed(server, worker, [job_type], lease_seconds=600)
    assert got is not None and got["id"] == job["id"]
    return job["id"], worker


def _send(server: LiveServer, method: str, path: str, body: Any, **kw: Any) -> Any:
    return (
        call(server, method, path, json=body, **kw)
        if body is not None
        else call(server, method, path, **kw)
    )


BAD_HEADERS = {
    "basic scheme": "Basic YWRtaW46YWRtaW4=",
    "bearer without token": "Bearer",
    "token without scheme": ADMIN_SECRET,
    "unknown key, current format": "Bearer " + generate_secret(),
    "admin secret with a typo": "Bearer " + ADMIN_SECRET[:-1] + "X",
    "oversized key": "Bearer ql_" + "x" * 5000,
    "sql in key": "Bearer ql_' OR '1'='1",
}


def test_v01_every_route_needs_a_live_key(server: LiveServer, job_type: str) -> None:
    job_id, _worker = _running(server, job_type)
    before = admin_view(server, job_type)
    for method, path, body in _routes(job_id, job_type):
        resp = _send(server, method, path, body)
        out = refused(resp, 401, "UNAUTHENTICATED")
        assert "Bearer" in out["message"] and resp.headers["www-authenticate"].startswith("Bearer")
        for what, header in BAD_HEADERS.items():
            resp = _send(server, method, path, body, headers={"Authorization": header})
            out = refused(resp, 401, "UNAUTHENTICATED")
            assert f'error_description="{out["message"]}"' in resp.headers["www-authenticate"], what
    assert admin_view(server, job_type) == before


def test_v01_revoked_key_refused_at_once(server: LiveServer, job_type: str) -> None:
    name = server.unique_name("rest-leaving")
    key = server.create_key("PRODUCER", [job_type], name=name)
    enqueued(server, key, type=job_type)
    server.gql("mutation($n: String!) { revokeApiKey(name: $n) }", {"n": name}, ADMIN_SECRET)
    before = admin_view(server, job_type)
    out = refused(call(server, "POST", "/jobs", key, {"type": job_type}), 401, "UNAUTHENTICATED")
    assert out["message"] == "invalid or revoked API key"
    refused(call(server, "GET", "/jobs", key), 401, "UNAUTHENTICATED")
    assert admin_view(server, job_type) == before


def test_v01_wrong_role_is_403(server: LiveServer, job_type: str) -> None:
    job_id, _worker = _running(server, job_type)
    producer = server.create_key("PRODUCER", [job_type], max_priority="CRITICAL")
    worker = server.create_key("WORKER", [job_type])
    viewer = server.create_key("VIEWER")
    before = admin_view(server, job_type)
    routes = {(method, path): body for method, path, body in _routes(job_id, job_type)}
    settle = [("POST", p) for _, p in routes if p.startswith(f"/jobs/{job_id}/")]
    claim, post = ("POST", "/jobs/claim"), ("POST", "/jobs")
    work, enqueue = "this needs a worker or admin key", "this needs a producer or admin key"
    cases = [(producer, r, f"{work}; yours is a producer key") for r in [claim, *settle]]
    cases += [(viewer, r, f"{work}; yours is a viewer key") for r in [claim, *settle]]
    cases += [(worker, post, f"{enqueue}; yours is a worker key")]
    cases += [(viewer, post, f"{enqueue}; yours is a viewer key")]
    for key, (method, path), message in cases:
        out = refused(call(server, method, path, key, routes[method, path]), 403, "FORBIDDEN")
        assert out["message"] == message, out
    assert admin_view(server, job_type) == before
    # Reads need any live key; each sees what it may (a viewer: everything).
    assert {j["id"] for j in ok(call(server, "GET", f"/jobs?type={job_type}", viewer))["jobs"]} == {
        job_id
    }
    assert ok(call(server, "GET", f"/jobs?type={job_type}", producer))["jobs"] == []


HOSTILE_TYPES = [
    "'; DROP TABLE jobs; --",
    "shutdown",
    "admin_task",
    "EMAIL",
    "email ",
    "",
    "t" * 5000,
]


def test_v02_unknown_or_unallowed_type_is_422(
    server: LiveServer, job_type: str, other_job_type: str
) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    worker = server.create_key("WORKER", [job_type])
    for hostile in [*HOSTILE_TYPES, other_job_type]:
        for key in (producer, ADMIN_SECRET):
            if key == ADMIN_SECRET and hostile == other_job_type:
                continue  # an admin may use every configured type
            body = refused(
                call(server, "POST", "/jobs", key, {"type": hostile}), 422, "JOB_TYPE_NOT_ALLOWED"
            )
            assert body["field"] == ["type"], body
        body = refused(
            call(server, "POST", "/jobs/claim", worker, {"types": [hostile]}),
            422,
            "JOB_TYPE_NOT_ALLOWED",
        )
        assert body["field"] == ["types"], body
    assert ok(call(server, "GET", "/jobs", producer))["jobs"] == []
    assert admin_view(server, other_job_type) == []


def test_v03_priority_capped_by_the_key(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type])  # max priority: medium
    for priority in ("critical", "high"):
        resp = call(server, "POST", "/jobs", producer, {"type": job_type, "priority": priority})
        body = refused(resp, 422, "PRIORITY_NOT_ALLOWED")
        assert body["field"] == ["priority"] and priority.upper() in body["message"], body
    assert admin_view(server, job_type) == []
    for label in ("urgent", 30, None):
        resp = call(server, "POST", "/jobs", producer, {"type": job_type, "priority": label})
        assert refused(resp, 422, "BAD_USER_INPUT")["field"] == ["priority"]
    assert enqueued(server, producer, type=job_type, priority="medium")["priority"] == "medium"
    assert (
        enqueued(server, ADMIN_SECRET, type=job_type, priority="critical")["priority"] == "critical"
    )


def test_v04_worker_id_is_the_keys_name(server: LiveServer, job_type: str) -> None:
    name = server.unique_name("rest-real-worker")
    worker = server.create_key("WORKER", [job_type], name=name)
    job = enqueued(server, ADMIN_SECRET, type=job_type)
    before = admin_view(server, job_type)
    for spoof in ({"worker_id": "legit-worker-1"}, {"workerId": "legit-worker-1"}):
        resp = call(server, "POST", "/jobs/claim", worker, {"types": [job_type], **spoof})
        assert refused(resp, 422, "BAD_USER_INPUT")["field"] == list(spoof)
    assert admin_view(server, job_type) == before
    headers = {"X-Worker-Id": "legit-worker-1"}
    got = ok(call(server, "POST", "/jobs/claim", worker, {"types": [job_type]}, headers=headers))
    assert got["id"] == job["id"] and got["worker_id"] == name
    assert admin_job(server, job["id"])["worker_id"] == name


def test_v05_only_the_holder_settles(server: LiveServer, job_type: str) -> None:
    job_id, holder = _running(server, job_type)
    intruder = server.create_key("WORKER", [job_type])
    before = admin_view(server, job_type)
    attempts = [
        ("complete", {"result": {"forged": True}}),
        ("fail", {"error": "sabotage", "retryable": False}),
    ]
    for action, body in attempts:
        # A worker that never held the job learns nothing of it.
        out = refused(
            call(server, "POST", f"/jobs/{job_id}/{action}", intruder, body), 404, "NOT_FOUND"
        )
        assert out["field"] == ["id"] and out.get("job") is None
        # An admin may see it, and is told it is another worker's.
        out = refused(
            call(server, "POST", f"/jobs/{job_id}/{action}", ADMIN_SECRET, body),
            409,
            "INVALID_STATE",
        )
        assert out["job"]["status"] == "running"
    refused(call(server, "GET", f"/jobs/{job_id}", intruder), 404, "NOT_FOUND")
    for missing in ("999999999", "-1", "abc", "1%20OR%201=1", "9" * 40):
        refused(call(server, "POST", f"/jobs/{missing}/complete", holder, {}), 404, "NOT_FOUND")
        refused(call(server, "GET", f"/jobs/{missing}", ADMIN_SECRET), 404, "NOT_FOUND")
    assert admin_view(server, job_type) == before
    done = ok(call(server, "POST", f"/jobs/{job_id}/complete", holder, {"result": {"ok": 1}}))
    assert done["status"] == "completed"


def test_v05_expired_lease_is_409_not_job_owner(server: LiveServer, job_type: str) -> None:
    worker = server.create_key("WORKER", [job_type])
    job = enqueued(server, ADMIN_SECRET, type=job_type, max_retries=3)
    got = claimed(server, worker, [job_type], lease_seconds=1)
    assert got is not None and got["id"] == job["id"]
    deadline = time.monotonic() + 30  # the maintenance loop gives the job back
    while admin_job(server, job["id"])["status"] == "running":
        assert time.monotonic() < deadline, "the expired lease was never rescued"
        time.sleep(0.2)
    for action, body in (("complete", {}), ("fail", {"error": "late"})):
        out = refused(
            call(server, "POST", f"/jobs/{job['id']}/{action}", worker, body), 409, "NOT_JOB_OWNER"
        )
        assert out["field"] == ["id"]
    assert admin_job(server, job["id"])["result"] is None
