"""A job's whole life through the HTTP API of a live server, on both backends."""

from __future__ import annotations

from tests.support import ADMIN_SECRET, LiveServer

ENQUEUE = """mutation($input: EnqueueJobInput!) {
  enqueueJob(input: $input) {
    created job { id status priority producer } userErrors { code field }
  }
}"""
CLAIM = """mutation($types: [String!]) {
  claimJob(types: $types) { job { id status workerId leaseExpiresAt } userErrors { code } }
}"""


def test_enqueue_claim_complete(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    worker = server.create_key("WORKER", [job_type], name=server.unique_name("w"))
    out = server.gql(ENQUEUE, {"input": {"type": job_type, "payload": {"n": 1}}}, producer)
    job = out["enqueueJob"]["job"]
    assert out["enqueueJob"]["created"] is True
    assert job["status"] == "PENDING" and job["priority"] == "LOW"

    claimed = server.gql(CLAIM, {"types": [job_type]}, worker)["claimJob"]["job"]
    assert claimed["id"] == job["id"] and claimed["status"] == "RUNNING"
    assert claimed["leaseExpiresAt"] is not None

    done = server.gql(
        """mutation($id: ID!) { completeJob(id: $id, result: {ok: true}) {
             job { status result finishedAt events { previousStatus status } }
             userErrors { code } } }""",
        {"id": job["id"]},
        worker,
    )["completeJob"]
    assert done["userErrors"] == []
    assert done["job"]["status"] == "COMPLETED" and done["job"]["result"] == {"ok": True}
    assert [(e["previousStatus"], e["status"]) for e in done["job"]["events"]] == [
        (None, "PENDING"),
        ("PENDING", "RUNNING"),
        ("RUNNING", "COMPLETED"),
    ]
    seen = server.gql("query($id: ID!) { job(id: $id) { status } }", {"id": job["id"]}, producer)
    assert seen["job"]["status"] == "COMPLETED"


def test_admin_key_bootstrapped(server: LiveServer) -> None:
    assert server.gql("{ viewer { name role } }", key=ADMIN_SECRET)["viewer"] == {
        "name": "admin",
        "role": "ADMIN",
    }
