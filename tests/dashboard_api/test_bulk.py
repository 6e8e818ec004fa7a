"""cancelJobs and retryJobs through a live server, on both backends: each job changes as a
single cancelJob or retryJob would change it (and records the same event), within the
caller's visibility, in batches, `hasMore` telling the caller to go on."""

from __future__ import annotations

from typing import Any

from tests.api.attack import enqueued, snapshot, top_level_codes
from tests.support import ADMIN_SECRET, LiveServer

CANCEL_JOBS = """mutation($filter: JobFilter!, $limit: Int) {
  cancelJobs(filter: $filter, limit: $limit) { count hasMore userErrors { code field } }
}"""
RETRY_JOBS = """mutation($filter: JobFilter!, $limit: Int) {
  retryJobs(filter: $filter, limit: $limit) { count hasMore userErrors { code field } }
}"""
ENQUEUE_MANY = """mutation($inputs: [EnqueueJobInput!]!) {
  enqueueJobs(inputs: $inputs) { jobs { id } userErrors { code } }
}"""


def _run(server: LiveServer, doc: str, key: str, filter: dict[str, Any], limit: int) -> Any:
    data = server.gql(doc, {"filter": filter, "limit": limit}, key)
    return next(iter(data.values()))


def _statuses(server: LiveServer, job_type: str) -> dict[str, list[str]]:
    """Each job's status and the statuses of its history, by id."""
    jobs = snapshot(server, job_type)["jobs"]["nodes"]
    return {j["id"]: [j["status"], *(e["status"] for e in j["events"])] for j in jobs}


def test_cancel_then_retry_in_steps(server: LiveServer, job_type: str) -> None:
    made = [enqueued(server, ADMIN_SECRET, type=job_type)["id"] for _ in range(5)]
    only = {"types": [job_type]}
    assert _run(server, CANCEL_JOBS, ADMIN_SECRET, only, 2) == {
        "count": 2,
        "hasMore": True,
        "userErrors": [],
    }
    assert _run(server, CANCEL_JOBS, ADMIN_SECRET, only, 10)["count"] == 3
    again = _run(server, CANCEL_JOBS, ADMIN_SECRET, only, 10)
    assert (again["count"], again["hasMore"]) == (0, False)
    # The same history as a single cancel writes.
    assert _statuses(server, job_type) == {i: ["CANCELLED", "PENDING", "CANCELLED"] for i in made}
    retried = _run(server, RETRY_JOBS, ADMIN_SECRET, {**only, "statuses": ["CANCELLED"]}, 1000)
    assert (retried["count"], retried["hasMore"]) == (5, False)
    after = _statuses(server, job_type)
    assert after == {i: ["PENDING", "PENDING", "CANCELLED", "PENDING"] for i in made}


def test_more_jobs_than_one_batch(server: LiveServer, job_type: str) -> None:
    for _ in range(3):
        inputs = [{"type": job_type}] * 60
        assert server.gql(ENQUEUE_MANY, {"inputs": inputs}, ADMIN_SECRET)["enqueueJobs"]["jobs"]
    only = {"types": [job_type]}
    first = _run(server, CANCEL_JOBS, ADMIN_SECRET, only, 150)
    assert (first["count"], first["hasMore"]) == (150, True)
    rest = _run(server, CANCEL_JOBS, ADMIN_SECRET, only, 1000)
    assert (rest["count"], rest["hasMore"]) == (30, False)
    counts = snapshot(server, job_type)["queueStats"]
    assert (counts["pending"], counts["cancelled"]) == (0, 180)


def test_a_producer_cancels_only_its_own(server: LiveServer, job_type: str) -> None:
    mine = server.create_key("PRODUCER", [job_type])
    other = server.create_key("PRODUCER", [job_type])
    own = enqueued(server, mine, type=job_type)["id"]
    theirs = enqueued(server, other, type=job_type)["id"]
    done = _run(server, CANCEL_JOBS, mine, {"types": [job_type], "ids": [own, theirs]}, 10)
    assert (done["count"], done["hasMore"]) == (1, False)
    statuses = {i: s[0] for i, s in _statuses(server, job_type).items()}
    assert statuses == {own: "CANCELLED", theirs: "PENDING"}


def test_who_may(server: LiveServer, job_type: str) -> None:
    enqueued(server, ADMIN_SECRET, type=job_type)
    producer = server.create_key("PRODUCER", [job_type])
    viewer = server.create_key("VIEWER")
    worker = server.create_key("WORKER", [job_type])
    before = snapshot(server, job_type)
    variables = {"filter": {"types": [job_type]}, "limit": 10}
    for key, doc in [
        (producer, RETRY_JOBS),
        (viewer, RETRY_JOBS),
        (viewer, CANCEL_JOBS),
        (worker, CANCEL_JOBS),
    ]:
        body = server.post(doc, variables, key).json()
        assert top_level_codes(body) == ["FORBIDDEN"], body
    assert snapshot(server, job_type) == before


def test_refused_limits_and_filters(server: LiveServer, job_type: str) -> None:
    enqueued(server, ADMIN_SECRET, type=job_type)
    before = snapshot(server, job_type)
    only = {"types": [job_type]}
    for filter, limit, field in [
        (only, 0, ["limit"]),
        (only, 10_001, ["limit"]),
        ({**only, "payloadContains": [1]}, 10, ["filter", "payloadContains"]),
    ]:
        out = _run(server, CANCEL_JOBS, ADMIN_SECRET, filter, limit)
        assert out == {
            "count": 0,
            "hasMore": False,
            "userErrors": [{"code": "VALIDATION_FAILED", "field": field}],
        }
    # A schedule's jobs: this job is no schedule's, so nothing matches.
    out = _run(server, CANCEL_JOBS, ADMIN_SECRET, {**only, "schedule": "x"}, 10)
    assert out == {"count": 0, "hasMore": False, "userErrors": []}
    assert snapshot(server, job_type) == before
