"""The VIEWER role through a live server, on both backends: it reads what an admin reads
(every job, error texts, idempotency keys, statistics), never API keys, and changes nothing."""

from __future__ import annotations

from pathlib import Path

from tests.api.attack import ENQUEUE, FAIL, JOB, SNAPSHOT, claim, enqueued, snapshot
from tests.support import ADMIN_SECRET, LiveServer, live_server
from tests.test_cli import create_key

# Every mutation of the schema, each with variables it would accept from an allowed role.
MUTATIONS = {
    "enqueueJob": (ENQUEUE, lambda job_id, t: {"input": {"type": t}}),
    "enqueueJobs": (
        """mutation($t: String!) { enqueueJobs(inputs: [{type: $t}]) { jobs { id } } }""",
        lambda job_id, t: {"t": t},
    ),
    "claimJob": ("""mutation($t: String!) { claimJob(types: [$t]) { job { id } } }""", None),
    "claimJobs": (
        """mutation($t: String!) { claimJobs(limit: 1, types: [$t]) { jobs { id } } }""",
        None,
    ),
    "heartbeatJob": ("""mutation($id: ID!) { heartbeatJob(id: $id) { job { id } } }""", None),
    "completeJob": ("""mutation($id: ID!) { completeJob(id: $id) { job { id } } }""", None),
    "failJob": (FAIL, lambda job_id, t: {"id": job_id, "error": "x"}),
    "cancelJob": ("""mutation($id: ID!) { cancelJob(id: $id) { job { id } } }""", None),
    "retryJob": ("""mutation($id: ID!) { retryJob(id: $id) { job { id } } }""", None),
    "createApiKey": (
        """mutation { createApiKey(input: {name: "v-made", role: ADMIN}) { secret } }""",
        lambda job_id, t: {},
    ),
    "revokeApiKey": ("""mutation { revokeApiKey(name: "admin") }""", lambda job_id, t: {}),
}


def _variables(name: str, job_id: str, job_type: str) -> dict[str, object]:
    make = MUTATIONS[name][1]
    if make is not None:
        return make(job_id, job_type)
    return {"t": job_type} if "$t" in MUTATIONS[name][0] else {"id": job_id}


def _failed_job(server: LiveServer, job_type: str) -> tuple[str, str]:
    """A job of a fresh producer, failed for good by a worker; returns (job id, producer)."""
    producer = server.create_key("PRODUCER", [job_type])
    worker = server.create_key("WORKER", [job_type])
    job = enqueued(server, producer, type=job_type, idempotencyKey="order-7")
    assert claim(server, worker, [job_type])["job"]["id"] == job["id"]
    failed = server.gql(FAIL, {"id": job["id"], "error": "boom", "retryable": False}, worker)
    assert failed["failJob"]["job"]["status"] == "FAILED"
    return job["id"], producer


def test_viewer_reads_what_an_admin_reads(server: LiveServer, job_type: str) -> None:
    job_id, producer = _failed_job(server, job_type)
    viewer = server.create_key("VIEWER")
    assert server.gql("{ viewer { role } }", key=viewer)["viewer"] == {"role": "VIEWER"}
    # The job of another key's producer, with its error text and idempotency key.
    as_viewer = server.gql(JOB, {"id": job_id}, viewer)["job"]
    assert as_viewer == server.gql(JOB, {"id": job_id}, ADMIN_SECRET)["job"]
    assert as_viewer["error"] == "boom" and as_viewer["idempotencyKey"] == "order-7"
    # Lists, counts and each job's history as the admin reads them.
    assert server.gql(SNAPSHOT, {"type": job_type}, viewer) == snapshot(server, job_type)
    assert server.gql(SNAPSHOT, {"type": job_type}, viewer)["jobs"]["totalCount"] == 1
    # A producer still sees its own job without the error text.
    assert server.gql(JOB, {"id": job_id}, producer)["job"]["error"] is None


def test_viewer_never_reads_api_keys(server: LiveServer) -> None:
    viewer = server.create_key("VIEWER")
    body = server.post("{ apiKeys { name } }", key=viewer).json()
    assert [e["extensions"]["code"] for e in body["errors"]] == ["FORBIDDEN"]
    assert body["data"] is None


def test_every_mutation_is_forbidden_to_a_viewer(server: LiveServer, job_type: str) -> None:
    job_id, _producer = _failed_job(server, job_type)
    pending = enqueued(server, ADMIN_SECRET, type=job_type)
    viewer = server.create_key("VIEWER")
    before = snapshot(server, job_type)
    for name, (doc, _make) in MUTATIONS.items():
        target = pending["id"] if name in ("cancelJob", "heartbeatJob", "completeJob") else job_id
        body = server.post(doc, _variables(name, target, job_type), viewer).json()
        assert [e["extensions"]["code"] for e in body["errors"]] == ["FORBIDDEN"], (name, body)
        assert "viewer key" in body["errors"][0]["message"], body
    assert snapshot(server, job_type) == before
    keys = server.gql("{ apiKeys { name revokedAt } }", key=ADMIN_SECRET)["apiKeys"]
    assert "v-made" not in {k["name"] for k in keys}
    assert all(k["revokedAt"] is None for k in keys if k["name"] == "admin")


def test_cli_creates_a_viewer_key(db_url: str, tmp_path: Path) -> None:
    secret = create_key(db_url, tmp_path, "--name", "oncall", "--role", "viewer")
    with live_server(db_url, tmp_path, admin_key=None) as server:
        me = server.gql("{ viewer { name role } }", key=secret)["viewer"]
        assert me == {"name": "oncall", "role": "VIEWER"}
