"""V-02: any job type. Only configured types are accepted, and a key restricted by
`allowedTypes` may enqueue or claim no other."""

from __future__ import annotations

from tests.api.attack import api_keys, claim, codes, enqueue, enqueued, snapshot
from tests.support import ADMIN_SECRET, LiveServer

HOSTILE_TYPES = [
    "'; DROP TABLE jobs; --",
    "shutdown",
    "admin_task",
    "EMAIL",
    "email ",
    "",
    "t" * 5000,
]
MY_JOBS = "{ jobs { totalCount } }"


def test_v02_unknown_type_refused(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER")  # no allowedTypes: every configured type
    for hostile in HOSTILE_TYPES:
        for key in (producer, ADMIN_SECRET):
            out = enqueue(server, key, type=hostile, payload={"x": 1})
            assert out["job"] is None and out["created"] is False, out
            assert codes(out) == ["JOB_TYPE_NOT_ALLOWED"], out
            assert out["userErrors"][0]["field"] == ["input", "type"]
        assert snapshot(server, hostile)["jobs"]["totalCount"] == 0
    assert server.gql(MY_JOBS, key=producer)["jobs"]["totalCount"] == 0
    # The same key enqueues a configured type.
    assert enqueued(server, producer, type=job_type)["type"] == job_type


def test_v02_unknown_type_in_a_batch_refuses_the_whole_batch(
    server: LiveServer, job_type: str
) -> None:
    producer = server.create_key("PRODUCER")
    out = server.gql(
        """mutation($inputs: [EnqueueJobInput!]!) {
             enqueueJobs(inputs: $inputs) { jobs { id } userErrors { code field } } }""",
        {"inputs": [{"type": job_type}, {"type": "shutdown"}]},
        producer,
    )["enqueueJobs"]
    assert out["jobs"] == []
    assert out["userErrors"] == [{"code": "JOB_TYPE_NOT_ALLOWED", "field": ["inputs", "1", "type"]}]
    assert snapshot(server, job_type)["jobs"]["totalCount"] == 0


def test_v02_worker_cannot_claim_unknown_type(server: LiveServer, job_type: str) -> None:
    worker = server.create_key("WORKER")
    enqueued(server, ADMIN_SECRET, type=job_type)
    before = snapshot(server, job_type)
    for hostile in ("'; DROP TABLE jobs; --", "shutdown"):
        out = claim(server, worker, [job_type, hostile])
        assert out["job"] is None
        assert codes(out) == ["JOB_TYPE_NOT_ALLOWED"]
        assert out["userErrors"][0]["field"] == ["types"]
    assert snapshot(server, job_type) == before


def test_v02_restricted_producer_cannot_enqueue_other_types(
    server: LiveServer, job_type: str, other_job_type: str
) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    viewer = server.gql("{ viewer { allowedTypes } }", key=producer)["viewer"]
    assert viewer == {"allowedTypes": [job_type]}
    for forbidden_type in (other_job_type, "email"):
        out = enqueue(server, producer, type=forbidden_type)
        assert out["job"] is None
        assert codes(out) == ["JOB_TYPE_NOT_ALLOWED"]
        assert out["userErrors"][0]["field"] == ["input", "type"]
    assert snapshot(server, other_job_type)["jobs"]["totalCount"] == 0
    assert server.gql(MY_JOBS, key=producer)["jobs"]["totalCount"] == 0
    assert enqueued(server, producer, type=job_type)["type"] == job_type


def test_v02_restricted_worker_cannot_claim_other_types(
    server: LiveServer, job_type: str, other_job_type: str
) -> None:
    worker = server.create_key("WORKER", [job_type])
    theirs = enqueued(server, ADMIN_SECRET, type=other_job_type, priority="CRITICAL")
    before = snapshot(server, other_job_type)

    out = claim(server, worker, [other_job_type])
    assert out["job"] is None and codes(out) == ["JOB_TYPE_NOT_ALLOWED"]
    assert out["userErrors"][0]["field"] == ["types"]
    # Without `types` the worker claims only its own types: nothing here, although a
    # CRITICAL job of another type is waiting.
    assert claim(server, worker, None) == {"job": None, "userErrors": []}
    assert snapshot(server, other_job_type) == before

    mine = enqueued(server, ADMIN_SECRET, type=job_type, priority="LOW")
    got = claim(server, worker, None)["job"]
    assert got["id"] == mine["id"] and got["id"] != theirs["id"]


def test_v02_key_with_unknown_allowed_type_not_created(server: LiveServer) -> None:
    name = server.unique_name("bad-types")
    out = server.gql(
        """mutation($input: CreateApiKeyInput!) {
             createApiKey(input: $input) { apiKey { name } secret userErrors { code field } } }""",
        {"input": {"name": name, "role": "PRODUCER", "allowedTypes": ["email", "shutdown"]}},
        ADMIN_SECRET,
    )["createApiKey"]
    assert out == {
        "apiKey": None,
        "secret": None,
        "userErrors": [{"code": "JOB_TYPE_NOT_ALLOWED", "field": ["input", "allowedTypes"]}],
    }
    assert name not in api_keys(server)
