"""The seed's ten weaknesses, attacked once more end to end (the detailed attacks live in
tests/api): each must stay closed behind the hardened edge, on both backends."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.security.http import raw, send
from tests.support import ADMIN_SECRET, LiveServer

ENQUEUE = """mutation($i: EnqueueJobInput!) { enqueueJob(input: $i) {
  created job { id payload producer } userErrors { code } } }"""
CLAIM = """mutation($t: [String!]) { claimJob(types: $t) {
  job { id workerId } userErrors { code } } }"""
FAIL = """mutation($id: ID!, $e: String!) { failJob(id: $id, error: $e, retryable: false) {
  job { id } userErrors { code } } }"""
JOB = "query($id: ID!) { job(id: $id) { id error idempotencyKey } }"


def enqueue(server: LiveServer, key: str, **fields: Any) -> dict[str, Any]:
    return dict(server.gql(ENQUEUE, {"i": fields}, key)["enqueueJob"])


def codes(payload: dict[str, Any]) -> list[str]:
    return [e["code"] for e in payload["userErrors"]]


def test_v01_to_v05(server: LiveServer, job_type: str) -> None:
    anonymous = send(server, ENQUEUE, {"i": {"type": job_type}})
    assert anonymous.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"  # V-01
    producer = server.create_key("PRODUCER", [job_type])
    assert codes(enqueue(server, producer, type="email")) == ["JOB_TYPE_NOT_ALLOWED"]  # V-02
    assert codes(enqueue(server, producer, type=job_type, priority="CRITICAL")) == [
        "PRIORITY_NOT_ALLOWED"  # V-03
    ]
    job = enqueue(server, producer, type=job_type)["job"]
    worker = server.create_key("WORKER", [job_type], name=server.unique_name("w"))
    claimed = server.gql(CLAIM, {"t": [job_type]}, worker)["claimJob"]["job"]
    assert claimed["id"] == job["id"] and claimed["workerId"].startswith("w-")  # V-04
    thief = server.create_key("WORKER", [job_type])
    stolen = server.gql(FAIL, {"id": job["id"], "e": "x"}, thief)["failJob"]
    assert codes(stolen) == ["NOT_FOUND"]  # V-05: and it learns nothing of the job


def test_v06_concurrent_claims_never_share_a_job(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    server.gql(
        "mutation($i: [EnqueueJobInput!]!) { enqueueJobs(inputs: $i) { jobs { id } } }",
        {"i": [{"type": job_type}] * 40},
        producer,
    )
    workers = [server.create_key("WORKER", [job_type]) for _ in range(4)]

    def drain(key: str) -> list[str]:
        got = []
        while job := server.gql(CLAIM, {"t": [job_type]}, key)["claimJob"]["job"]:
            got.append(job["id"])
        return got

    with ThreadPoolExecutor(4) as pool:
        held = [i for ids in pool.map(drain, workers) for i in ids]
    assert len(held) == 40 == len(set(held))


def test_v07_v08_sizes_and_sql_text(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    big = enqueue(server, producer, type=job_type, payload={"x": "a" * 70_000})
    assert codes(big) == ["PAYLOAD_TOO_LARGE"]  # V-07
    body = b'{"query": "{ __typename }", "variables": {"x": "' + b"a" * 3_000_000 + b'"}}'
    assert raw(server, body, "application/json").status_code == 413
    sql = "'); DROP TABLE jobs; --"
    stored = enqueue(server, producer, type=job_type, payload={"s": sql})["job"]
    assert stored["payload"] == {"s": sql}  # V-08: literal text, tables intact
    assert server.gql(JOB, {"id": stored["id"]}, ADMIN_SECRET)["job"]["id"] == stored["id"]


def test_v09_v10_probing_and_leakage(server: LiveServer, job_type: str) -> None:
    alice = server.create_key("PRODUCER", [job_type])
    mallory = server.create_key("PRODUCER", [job_type])
    first = enqueue(server, alice, type=job_type, idempotencyKey="k-1")["job"]
    probe = enqueue(server, mallory, type=job_type, idempotencyKey="k-1")
    assert probe["created"] is True and probe["job"]["id"] != first["id"]  # V-09
    assert server.gql(JOB, {"id": first["id"]}, mallory)["job"] is None
    worker = server.create_key("WORKER", [job_type])
    job = server.gql(CLAIM, {"t": [job_type]}, worker)["claimJob"]["job"]
    secret = "password=hunter2 postgresql://u:pw@db/x"
    server.gql(FAIL, {"id": job["id"], "e": secret}, worker)
    as_admin = server.gql(JOB, {"id": job["id"]}, ADMIN_SECRET)["job"]["error"]
    assert "hunter2" not in as_admin and ":pw@" not in as_admin  # V-10
    owner = alice if job["id"] == first["id"] else mallory
    assert server.gql(JOB, {"id": job["id"]}, owner)["job"]["error"] is None
