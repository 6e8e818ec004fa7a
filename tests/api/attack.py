"""Shared operations for the V-01 … V-10 attack tests: what an outsider sends, and what an
admin reads afterwards to prove that a refused request changed nothing."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support import ADMIN_SECRET, LiveServer

# Raw requests, with whatever headers an attacker chooses.
CLIENT = httpx.Client(timeout=30)

ENQUEUE = """mutation($input: EnqueueJobInput!) {
  enqueueJob(input: $input) {
    created
    job { id type payload priority status producer idempotencyKey }
    userErrors { code message field }
  }
}"""
CLAIM = """mutation($types: [String!], $lease: Int) {
  claimJob(types: $types, leaseSeconds: $lease) {
    job { id type status workerId leaseExpiresAt idempotencyKey error }
    userErrors { code message field }
  }
}"""
COMPLETE = """mutation($id: ID!, $result: JSON) {
  completeJob(id: $id, result: $result) {
    job { id status result } userErrors { code message field }
  }
}"""
FAIL = """mutation($id: ID!, $error: String!, $retryable: Boolean) {
  failJob(id: $id, error: $error, retryable: $retryable) {
    job { id status error retryCount } willRetry userErrors { code message field }
  }
}"""
HEARTBEAT = """mutation($id: ID!) {
  heartbeatJob(id: $id, leaseSeconds: 600) {
    job { id leaseExpiresAt } userErrors { code message field }
  }
}"""
JOB = """query($id: ID!) {
  job(id: $id) { id type status payload error idempotencyKey workerId result retryCount }
}"""
# Everything an admin can read about the jobs of one type: a refused mutation must leave
# this exactly as it was.
SNAPSHOT = """query($type: String!) {
  jobs(type: $type, first: 100) {
    totalCount
    nodes {
      id status priority payload retryCount maxRetries idempotencyKey producer workerId
      claimedAt leaseExpiresAt error result updatedAt finishedAt
      events { cursor status }
    }
  }
  queueStats(type: $type) { pending running completed failed cancelled }
}"""


def snapshot(server: LiveServer, job_type: str) -> dict[str, Any]:
    """The admin's view of every job of `job_type` (the test's own type)."""
    return server.gql(SNAPSHOT, {"type": job_type}, ADMIN_SECRET)


def admin_job(server: LiveServer, job_id: str) -> dict[str, Any]:
    job = server.gql(JOB, {"id": job_id}, ADMIN_SECRET)["job"]
    assert job is not None, f"job {job_id} is gone"
    return dict(job)


def api_keys(server: LiveServer) -> dict[str, Any]:
    keys = server.gql("{ apiKeys { name role revokedAt } }", key=ADMIN_SECRET)["apiKeys"]
    return {k["name"]: k for k in keys}


def enqueue(server: LiveServer, key: str, **input: Any) -> dict[str, Any]:
    """Run enqueueJob; return its payload (the caller checks userErrors)."""
    return dict(server.gql(ENQUEUE, {"input": input}, key)["enqueueJob"])


def enqueued(server: LiveServer, key: str, **input: Any) -> dict[str, Any]:
    """Enqueue a job that must be accepted; return it."""
    out = enqueue(server, key, **input)
    assert out["userErrors"] == [] and out["created"] is True, out
    return dict(out["job"])


def claim(
    server: LiveServer, key: str, types: list[str] | None, lease: int | None = None
) -> dict[str, Any]:
    return dict(server.gql(CLAIM, {"types": types, "lease": lease}, key)["claimJob"])


def codes(payload: dict[str, Any]) -> list[str]:
    return [e["code"] for e in payload["userErrors"]]


def top_level_codes(body: dict[str, Any]) -> list[str]:
    return [e.get("extensions", {}).get("code") for e in body.get("errors") or []]


def send(
    server: LiveServer, doc: str, variables: dict[str, Any], headers: dict[str, str]
) -> httpx.Response:
    return CLIENT.post(server.url, json={"query": doc, "variables": variables}, headers=headers)
