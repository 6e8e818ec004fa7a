"""A worker learns nothing about jobs it never held: settling one answers NOT_FOUND, word
for word as for an id that does not exist, whether the job is running (held by another
worker), pending, finished or absent. NOT_JOB_OWNER is only for a job the caller held."""

from __future__ import annotations

from typing import Any

from tests.security.http import send
from tests.support import ADMIN_SECRET, LiveServer

ENQUEUE = "mutation($t: String!) { enqueueJob(input: {type: $t}) { job { id } } }"
CLAIM = "mutation($t: [String!]) { claimJob(types: $t) { job { id } } }"
# Each holder-only mutation, aliased, its selection through a fragment.
SETTLE = """mutation($id: ID!) {
  c: completeJob(id: $id, result: {x: 1}) { ...shown }
  f: failJob(id: $id, error: "boom", retryable: false) { ...failShown }
  h: heartbeatJob(id: $id, leaseSeconds: 60) { ...shown }
}
fragment shown on JobPayload { job { id status } userErrors { code message field } }
fragment failShown on FailJobPayload { job { id status } userErrors { code message field } }"""
HEARTBEAT = """mutation($id: ID!) {
  heartbeatJob(id: $id) { job { status } userErrors { code } } }"""


def _answers(server: LiveServer, key: str, job_id: str) -> dict[str, Any]:
    """What `key` is told for each holder-only mutation on `job_id`, with the id blanked
    out of the messages (so that answers about different ids compare)."""
    body = send(server, SETTLE, {"id": job_id}, key).json()
    assert "errors" not in body, body
    return {
        alias: {
            **payload,
            "userErrors": [
                {**e, "message": e["message"].replace(job_id, "N")} for e in payload["userErrors"]
            ],
        }
        for alias, payload in body["data"].items()
    }


def test_a_worker_cannot_tell_running_jobs_from_absent_ones(
    server: LiveServer, job_type: str, other_job_type: str
) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    holder = server.create_key("WORKER", [job_type])

    def enqueue() -> str:
        return str(server.gql(ENQUEUE, {"t": job_type}, producer)["enqueueJob"]["job"]["id"])

    running, finished = enqueue(), enqueue()
    assert server.gql(CLAIM, {"t": [job_type]}, holder)["claimJob"]["job"]["id"] == running
    assert server.gql(CLAIM, {"t": [job_type]}, holder)["claimJob"]["job"]["id"] == finished
    done = server.gql(
        "mutation($id: ID!) { completeJob(id: $id) { userErrors { code } } }",
        {"id": finished},
        holder,
    )
    assert done["completeJob"]["userErrors"] == []
    pending = enqueue()
    absent = str(int(pending) + 1_000_000)

    nobody = {
        "job": None,
        "userErrors": [{"code": "NOT_FOUND", "message": "no job N", "field": ["id"]}],
    }
    # Workers of the job's type and of another type, probing every state.
    for prober in (
        server.create_key("WORKER", [job_type]),
        server.create_key("WORKER", [other_job_type]),
        server.create_key("WORKER"),
    ):
        for job_id in (running, pending, finished, absent):
            assert _answers(server, prober, job_id) == {"c": nobody, "f": nobody, "h": nobody}, (
                job_id
            )
            seen = server.gql("query($id: ID!) { job(id: $id) { id } }", {"id": job_id}, prober)
            assert seen == {"job": None}

    # The job is as it was, and its holder still holds it.
    job = server.gql("query($id: ID!) { job(id: $id) { status } }", {"id": running}, ADMIN_SECRET)
    assert job["job"]["status"] == "RUNNING"
    beat = server.gql(HEARTBEAT, {"id": running}, holder)["heartbeatJob"]
    assert beat == {"job": {"status": "RUNNING"}, "userErrors": []}


def test_the_last_holder_still_hears_why(server: LiveServer, job_type: str) -> None:
    """The worker that held a job is told what became of it: that is its own business."""
    producer = server.create_key("PRODUCER", [job_type])
    holder = server.create_key("WORKER", [job_type])
    job_id = server.gql(ENQUEUE, {"t": job_type}, producer)["enqueueJob"]["job"]["id"]
    assert server.gql(CLAIM, {"t": [job_type]}, holder)["claimJob"]["job"]["id"] == job_id
    cancel = "mutation($id: ID!) { cancelJob(id: $id) { userErrors { code } } }"
    assert server.gql(cancel, {"id": job_id}, producer)["cancelJob"]["userErrors"] == []
    answers = _answers(server, holder, job_id)
    for payload in answers.values():
        assert [e["code"] for e in payload["userErrors"]] == ["INVALID_STATE"]
        assert payload["job"]["status"] == "CANCELLED"
