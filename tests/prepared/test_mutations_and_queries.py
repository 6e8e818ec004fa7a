"""Every mutation and query, with the inputs and refusals of each, answers alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.prepared.documents import (
    API_KEYS,
    CANCEL,
    CLAIM,
    CLAIM_MANY,
    COMPLETE,
    CREATE_KEY,
    ENQUEUE,
    ENQUEUE_MANY,
    FAIL,
    HEARTBEAT,
    JOB,
    JOBS,
    RETRY,
    REVOKE_KEY,
    STATS,
    VIEWER,
)
from tests.prepared.harness import JSON, RUN_AT, Run, differential

OUTCOMES = """mutation($a: ID!, $b: ID!, $c: ID!, $r: JSON) {
  x: completeJob(id: $a, result: $r) { job { id status result } userErrors { code field } }
  y: failJob(id: $b, error: "e", retryable: false) { job { id status } willRetry
    userErrors { code } }
  z: heartbeatJob(id: $c, leaseSeconds: 60) { job { id status } userErrors { code } }
  w: completeJob(id: "999999") { job { id } userErrors { code } }
}"""
SAME_JOB_TWICE = """mutation($c: ID!) {
  x: completeJob(id: $c, result: 1) { job { id status result } userErrors { code } }
  y: failJob(id: $c, error: "late") { job { id status } willRetry userErrors { code } }
}"""


async def outcomes_together(post: Any) -> None:
    """Outcomes of several jobs in one document (run together when prepared), one refused,
    and two outcomes of the same job (always in order)."""
    batch = [{"type": "email", "payload": {"k": i}} for i in range(3)]
    await post("enqueueJobs, for outcomes", ENQUEUE_MANY, {"inputs": batch}, key="producer")
    got = await post("claimJobs, for outcomes", CLAIM_MANY, {"limit": 3, "types": ["email"]},
                     key="worker")  # fmt: skip
    a, b, c = (j["id"] for j in got["data"]["claimJobs"]["jobs"])
    await post("outcomes together", OUTCOMES, {"a": a, "b": b, "c": c, "r": [1]}, key="worker")
    await post("outcomes of one job twice", SAME_JOB_TWICE, {"c": c}, key="worker")
    await post("outcomes together, repeated", OUTCOMES, {"a": a, "b": b, "c": c, "r": [1]},
               key="worker")  # fmt: skip


async def mutations_script(run: Run) -> None:
    post = run.post
    full = {
        "type": "email",
        "payload": {"n": 1, "s": "é\u2603", "nested": [1, 2.5, None, True, {"k": []}]},
        "priority": "HIGH",
        "maxRetries": 5,
        "idempotencyKey": "order-1",
        "runAt": RUN_AT,
    }
    await post("enqueue, every input field", ENQUEUE, {"input": full}, key="producer")
    await post("enqueue, defaults", ENQUEUE, {"input": {"type": "email"}}, key="producer")
    await post(
        "enqueue, explicit nulls",
        ENQUEUE,
        {"input": {"type": "pdf", "payload": None, "priority": None, "maxRetries": None}},
        key="producer",
    )
    await post("enqueue, idempotency key again", ENQUEUE, {"input": full}, key="producer")
    reused = {**full, "payload": {"n": 2}}
    await post("enqueue, idempotency key reused", ENQUEUE, {"input": reused}, key="producer")
    delayed = {"type": "pdf", "delaySeconds": 3600, "idempotencyKey": "later"}
    await post("enqueue, delayed", ENQUEUE, {"input": delayed}, key="producer")
    await post("enqueue, type not allowed", ENQUEUE, {"input": {"type": "sync"}}, key="producer")
    await post("enqueue, unknown type", ENQUEUE, {"input": {"type": "nope"}}, key="producer")
    critical = {"type": "email", "priority": "CRITICAL"}
    await post("enqueue, priority not allowed", ENQUEUE, {"input": critical}, key="producer")
    big = {"type": "email", "payload": {"blob": "x" * 2000}}
    await post("enqueue, payload too large", ENQUEUE, {"input": big}, key="producer")
    await post(
        "enqueue, negative retries",
        ENQUEUE,
        {"input": {"type": "email", "maxRetries": -1}},
        key="producer",
    )
    both = {"type": "email", "runAt": RUN_AT, "delaySeconds": 5}
    await post("enqueue, runAt and delaySeconds", ENQUEUE, {"input": both}, key="producer")
    await post(
        "enqueue, literal arguments",
        """mutation { enqueueJob(input: {type: "pdf", priority: MEDIUM,
             payload: {a: [1, "x", null, {b: true}]}, maxRetries: 1}) {
             created job { id type payload priority maxRetries status } userErrors { code } } }""",
        key="producer",
    )
    await post(
        "enqueue, integers past 64 bits in the payload",
        ENQUEUE,
        {"input": {"type": "pdf", "payload": {"big": 2**70, "neg": -(2**65)}}},
        key="producer",
    )
    await post(
        "enqueue as admin",
        ENQUEUE,
        {"input": {"type": "sync", "priority": "CRITICAL"}},
        key="admin",
    )
    batch = [
        {"type": "email", "payload": {"i": 0}},
        {"type": "pdf", "payload": {"i": 1}, "priority": "HIGH"},
        {"type": "email", "payload": {"i": 2}, "priority": "MEDIUM", "idempotencyKey": "b-2"},
    ]
    await post("enqueueJobs, batch", ENQUEUE_MANY, {"inputs": batch}, key="producer")
    failing = [{"type": "email"}, {"type": "sync"}, {"type": "pdf"}]
    await post("enqueueJobs, a failing item", ENQUEUE_MANY, {"inputs": failing}, key="producer")
    await post("enqueueJobs, empty", ENQUEUE_MANY, {"inputs": []}, key="producer")
    await post(
        "enqueueJobs, one input for the list",
        ENQUEUE_MANY,
        {"inputs": {"type": "email", "payload": {"single": True}}},
        key="producer",
    )

    # highest priority first: the batch's MEDIUM email (of the emails), then the admin's
    # CRITICAL sync and the batch's HIGH pdf, then the literal MEDIUM pdf
    got = await post("claimJob, email only", CLAIM, {"types": ["email"]}, key="worker")
    first = got["data"]["claimJob"]["job"]["id"]
    got = await post("claimJobs, 2 of any type", CLAIM_MANY, {"limit": 2}, key="worker")
    second, third = (j["id"] for j in got["data"]["claimJobs"]["jobs"])
    got = await post("claimJob, lease of 60 s", CLAIM, {"lease": 60}, key="worker")
    fourth = got["data"]["claimJob"]["job"]["id"]
    await post("claimJob, unknown type", CLAIM, {"types": ["nope"]}, key="worker")
    await post("claimJob, lease 0", CLAIM, {"lease": 0}, key="worker")
    await post("claimJobs, limit 0", CLAIM_MANY, {"limit": 0}, key="worker")
    await post("claimJobs, limit 1000", CLAIM_MANY, {"limit": 1000, "types": ["pdf"]}, key="worker")
    await post("claimJob, nothing of its types", CLAIM, None, key="worker2")
    await post("claimJob, a type not allowed", CLAIM, {"types": ["email"]}, key="worker2")
    await post(
        "claimJob, literal arguments",
        'mutation { claimJob(types: ["email", "pdf"], leaseSeconds: 30) { job { id } } }',
        key="worker",
    )

    await post("heartbeat", HEARTBEAT, {"id": first, "lease": 600}, key="worker")
    await post("heartbeat, default lease", HEARTBEAT, {"id": first}, key="worker")
    await post("heartbeat, not the holder", HEARTBEAT, {"id": first}, key="worker2")
    await post("heartbeat, id not a number", HEARTBEAT, {"id": "abc"}, key="worker")
    await post("heartbeat, missing job", HEARTBEAT, {"id": "999999"}, key="worker")
    await post("heartbeat, lease too long", HEARTBEAT, {"id": first, "lease": 10**6}, key="worker")
    result = {"ok": True, "pages": [1, 2], "note": None}
    await post("complete", COMPLETE, {"id": first, "result": result}, key="worker")
    await post("complete again", COMPLETE, {"id": first}, key="worker")
    await post(
        "complete, result too large", COMPLETE, {"id": second, "result": "y" * 5000}, key="worker"
    )
    await post("fail, will retry", FAIL, {"id": second, "error": "boom\nline 2"}, key="worker")
    await post(
        "fail, final", FAIL, {"id": third, "error": "fatal", "retryable": False}, key="worker"
    )
    await post("fail, not running", FAIL, {"id": third, "error": "again"}, key="worker")
    await post("fail as a producer", FAIL, {"id": fourth, "error": "x"}, key="producer")
    await outcomes_together(post)

    got = await post("enqueue, to cancel", ENQUEUE, {"input": {"type": "pdf"}}, key="producer")
    pending = got["data"]["enqueueJob"]["job"]["id"]
    await post("cancel, another producer's job", CANCEL, {"id": pending}, key="producer2")
    await post("cancel", CANCEL, {"id": pending}, key="producer")
    await post("cancel, already cancelled", CANCEL, {"id": pending}, key="producer")
    await post("cancel, a running job", CANCEL, {"id": fourth}, key="producer")
    await post("cancel as a worker", CANCEL, {"id": fourth}, key="worker")
    await post("retry a failed job", RETRY, {"id": third}, key="admin")
    await post("retry a cancelled job", RETRY, {"id": pending}, key="admin")
    await post("retry a pending job", RETRY, {"id": pending}, key="admin")
    await post("retry, missing job", RETRY, {"id": "424242"}, key="admin")
    await post("retry as a producer", RETRY, {"id": third}, key="producer")

    key_input = {"name": "made", "role": "WORKER", "allowedTypes": ["email", "email"]}
    await post("createApiKey", CREATE_KEY, {"input": key_input}, key="admin")
    await post("createApiKey, name taken", CREATE_KEY, {"input": key_input}, key="admin")
    odd = {"name": "odd", "role": "PRODUCER", "allowedTypes": ["nope"], "maxPriority": "HIGH"}
    await post("createApiKey, unknown type", CREATE_KEY, {"input": odd}, key="admin")
    await post(
        "createApiKey, bad name",
        CREATE_KEY,
        {"input": {"name": " x", "role": "ADMIN"}},
        key="admin",
    )
    await post("createApiKey as a producer", CREATE_KEY, {"input": key_input}, key="producer")
    await post("revokeApiKey", REVOKE_KEY, {"name": "made"}, key="admin")
    await post("revokeApiKey again", REVOKE_KEY, {"name": "made"}, key="admin")
    await post("revokeApiKey as a worker", REVOKE_KEY, {"name": "root"}, key="worker")

    await post("apiKeys", API_KEYS, key="admin")
    await post("apiKeys as a producer", API_KEYS, key="producer")
    await post("queueStats", STATS, key="admin")
    await post("queueStats of a type", STATS, {"type": "email"}, key="producer")
    await post("queueStats as a worker", STATS, None, key="worker")
    await post("viewer", VIEWER, key="producer")
    await post("viewer, worker", VIEWER, key="worker2")
    await post("viewer, admin", VIEWER, key="admin")
    for who in ("producer", "producer2", "worker", "admin"):
        await post(f"job as {who}", JOB, {"id": third}, key=who)
    await post("job, missing", JOB, {"id": "987654"}, key="admin")
    await post("job, invalid id", JOB, {"id": "not-a-number"}, key="admin")
    await post("job, id too long", JOB, {"id": "1" * 40}, key="admin")
    await post("job, literal id", 'query { job(id: "1") { id type status } }', key="admin")
    await post("job, integer literal id", "{ job(id: 2) { id } }", key="admin")
    page = await post("jobs, first page", JOBS, {"first": 3}, key="admin")
    after = page["data"]["jobs"]["pageInfo"]["endCursor"]
    await post("jobs, next page", JOBS, {"first": 3, "after": after}, key="admin")
    await post("jobs, defaults", JOBS, None, key="producer")
    await post("jobs, by status", JOBS, {"status": "CANCELLED"}, key="admin")
    await post("jobs, by type", JOBS, {"type": "pdf", "first": None}, key="worker")
    await post("jobs, first 0", JOBS, {"first": 0}, key="admin")
    await post("jobs, first 101", JOBS, {"first": 101}, key="admin")
    await post("jobs, bad cursor", JOBS, {"after": "garbage"}, key="admin")
    await post("jobs, unknown type", JOBS, {"type": "nope"}, key="admin")
    await post("jobs, as JSON", JOBS, {"first": 0}, key="admin", accept=JSON)
    await post(
        "jobs, connection with literals",
        """{ jobs(first: 2, status: PENDING) { totalCount
             edges { cursor node { id priority } } pageInfo { endCursor hasNextPage }
             nodes { id } } }""",
        key="admin",
    )


async def test_mutations_and_queries_answer_alike(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped, _ = await differential(mutations_script, backend, tmp_path, monkeypatch)
    # the script did what it says: it ran, and did not only collect errors
    bodies = {e.name: e.body for e in shipped.exchanges}
    assert bodies["enqueue, idempotency key again"]["data"]["enqueueJob"]["created"] is False
    assert bodies["complete"]["data"]["completeJob"]["job"]["status"] == "COMPLETED"
    together = bodies["outcomes together"]["data"]
    assert together["x"]["job"]["status"] == "COMPLETED" and together["y"]["willRetry"] is False
    assert together["z"]["job"]["status"] == "RUNNING" and together["w"]["userErrors"]
    twice = bodies["outcomes of one job twice"]["data"]
    assert twice["x"]["job"]["status"] == "COMPLETED" and twice["y"]["userErrors"]
    assert bodies["fail, will retry"]["data"]["failJob"]["willRetry"] is True
    assert bodies["createApiKey"]["data"]["createApiKey"]["secret"] == "<secret>"
    assert bodies["revokeApiKey"]["data"] == {"revokeApiKey": True}
