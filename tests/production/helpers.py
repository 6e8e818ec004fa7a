"""Operations and small helpers shared by the production-readiness tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from tests.support import ADMIN_SECRET, LiveServer

T = TypeVar("T")

JOB = (
    "id status type retryCount maxRetries runAt claimedAt workerId leaseExpiresAt"
    " error result updatedAt finishedAt"
)
ERRORS = "userErrors { code message field }"

ENQUEUE = f"""mutation($input: EnqueueJobInput!) {{
  enqueueJob(input: $input) {{ created job {{ {JOB} }} {ERRORS} }} }}"""
ENQUEUE_MANY = f"""mutation($inputs: [EnqueueJobInput!]!) {{
  enqueueJobs(inputs: $inputs) {{ jobs {{ {JOB} }} {ERRORS} }} }}"""
CLAIM = f"""mutation($types: [String!], $lease: Int) {{
  claimJob(types: $types, leaseSeconds: $lease) {{ job {{ {JOB} }} {ERRORS} }} }}"""
CLAIM_MANY = f"""mutation($limit: Int!, $types: [String!], $lease: Int) {{
  claimJobs(limit: $limit, types: $types, leaseSeconds: $lease) {{
    jobs {{ {JOB} }} {ERRORS} }} }}"""
HEARTBEAT = f"""mutation($id: ID!, $lease: Int) {{
  heartbeatJob(id: $id, leaseSeconds: $lease) {{ job {{ {JOB} }} {ERRORS} }} }}"""
COMPLETE = f"""mutation($id: ID!, $result: JSON) {{
  completeJob(id: $id, result: $result) {{ job {{ {JOB} }} {ERRORS} }} }}"""
FAIL = f"""mutation($id: ID!, $error: String!, $retryable: Boolean) {{
  failJob(id: $id, error: $error, retryable: $retryable) {{ willRetry job {{ {JOB} }} {ERRORS} }}
}}"""
CANCEL = f"""mutation($id: ID!) {{ cancelJob(id: $id) {{ job {{ {JOB} }} {ERRORS} }} }}"""
RETRY = f"""mutation($id: ID!) {{ retryJob(id: $id) {{ job {{ {JOB} }} {ERRORS} }} }}"""
GET = f"""query($id: ID!) {{ job(id: $id) {{ {JOB}
  events(first: 1000) {{ previousStatus status }} }} }}"""
STATS = """query($type: String) {
  queueStats(type: $type) { pending running completed failed cancelled } }"""
PAGE = f"""query($type: String, $after: String) {{
  jobs(type: $type, first: 100, after: $after) {{
    nodes {{ {JOB} events(first: 1000) {{ previousStatus status }} }}
    pageInfo {{ hasNextPage endCursor }} }} }}"""


@dataclass
class Keys:
    """A producer and two workers for one job type on one server."""

    server: LiveServer
    type: str
    producer: str
    worker: str
    worker2: str

    @classmethod
    def make(cls, server: LiveServer, job_type: str) -> Keys:
        return cls(
            server,
            job_type,
            server.create_key("PRODUCER", [job_type]),
            server.create_key("WORKER", [job_type], name=server.unique_name("w1")),
            server.create_key("WORKER", [job_type], name=server.unique_name("w2")),
        )

    def enqueue(self, **fields: Any) -> dict[str, Any]:
        out = self.server.gql(ENQUEUE, {"input": {"type": self.type, **fields}}, self.producer)
        assert out["enqueueJob"]["userErrors"] == [], out
        return dict(out["enqueueJob"]["job"])

    def claim(self, key: str | None = None, lease: int | None = None) -> dict[str, Any] | None:
        out = self.server.gql(CLAIM, {"types": [self.type], "lease": lease}, key or self.worker)
        assert out["claimJob"]["userErrors"] == [], out
        job = out["claimJob"]["job"]
        return None if job is None else dict(job)

    def call(self, op: str, key: str | None = None, **variables: Any) -> dict[str, Any]:
        """Run a mutation; return its payload (the only field of `data`)."""
        data = self.server.gql(op, variables, key or self.worker)
        return dict(next(iter(data.values())))

    def job(self, job_id: str) -> dict[str, Any]:
        job = self.server.gql(GET, {"id": job_id}, ADMIN_SECRET)["job"]
        assert job is not None, f"job {job_id} is gone"
        return dict(job)

    def stats(self) -> dict[str, int]:
        return dict(self.server.gql(STATS, {"type": self.type}, ADMIN_SECRET)["queueStats"])


def all_jobs(server: LiveServer, job_type: str) -> list[dict[str, Any]]:
    """Every job of `job_type`, with its events, as the admin sees them."""
    out: list[dict[str, Any]] = []
    after = None
    while True:
        page = server.gql(PAGE, {"type": job_type, "after": after}, ADMIN_SECRET)["jobs"]
        out.extend(page["nodes"])
        if not page["pageInfo"]["hasNextPage"]:
            return out
        after = page["pageInfo"]["endCursor"]


def transitions(job: dict[str, Any]) -> list[tuple[str | None, str]]:
    return [(e["previousStatus"], e["status"]) for e in job["events"]]


def ts(value: str) -> datetime:
    return datetime.fromisoformat(value)


def seconds(later: str, earlier: str) -> float:
    return (ts(later) - ts(earlier)).total_seconds()


def wait_for(probe: Callable[[], T | None], timeout: float = 10.0, every: float = 0.1) -> T:
    """Poll `probe` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {probe}")
        time.sleep(every)
