"""Payload and result values come back exactly as they were sent, or are refused: the same
way on every path (an inline literal, variables over POST, GET and WebSocket, enqueueJob,
enqueueJobs, completeJob's result), on both backends.

Two classes: a number JSON text here cannot carry exactly (an integer beyond 64 bits, an
infinity) was stored as a float or as null; and a payload nested just within what storing it
allowed failed later, when the idempotency hash nested it one level deeper. One depth limit
(`validation.JSON_MAX_DEPTH`) now holds for storing, hashing and serving alike."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from queuelog.service.models import EnqueueRequest, Priority
from queuelog.service.validation import JSON_MAX_DEPTH, request_hash
from tests.security.http import CLIENT, send
from tests.subscriptions.wsclient import ws
from tests.support import LiveServer

ENQUEUE = """mutation($i: EnqueueJobInput!) {
  enqueueJob(input: $i) { created job { id payload } userErrors { code field message } } }"""
ENQUEUE_MANY = """mutation($i: [EnqueueJobInput!]!) {
  enqueueJobs(inputs: $i) { jobs { id payload } userErrors { code field message } } }"""
CLAIM = "mutation($t: [String!]) { claimJob(types: $t) { job { id } } }"
COMPLETE = """mutation($id: ID!, $r: JSON) {
  completeJob(id: $id, result: $r) { job { result } userErrors { code field message } } }"""

BIG = 2**64  # the smallest integer beyond 64 bits (unsigned)
EXACT = {"max": 2**64 - 1, "min": -(2**63), "float": 1.5, "huge": 1e300, "tiny": 5e-324}


def nested(levels: int) -> dict[str, Any]:
    """An object `levels` objects deep."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


ERRORS = "userErrors { code field }"


def inline_enqueue(job_type: str, payload: str, selection: str) -> str:
    """An enqueueJob whose payload is written in the document, as a literal."""
    fields = f'type: "{job_type}", payload: {payload}'
    return f"mutation {{ enqueueJob(input: {{{fields}}}) {{ {selection} }} }}"


def codes(payload: dict[str, Any]) -> list[tuple[str, list[str]]]:
    return [(e["code"], e["field"]) for e in payload["userErrors"]]


def enqueue(server: LiveServer, key: str, **fields: Any) -> dict[str, Any]:
    return dict(server.gql(ENQUEUE, {"i": fields}, key)["enqueueJob"])


@pytest.fixture
def keys(server: LiveServer, job_type: str) -> tuple[str, str]:
    return server.create_key("PRODUCER", [job_type]), server.create_key("WORKER", [job_type])


# -- numbers ----------------------------------------------------------------------------------


def test_exact_numbers_are_kept_on_every_path(
    server: LiveServer, job_type: str, keys: tuple[str, str]
) -> None:
    producer, worker = keys
    made = enqueue(server, producer, type=job_type, payload=EXACT)
    assert made["userErrors"] == [] and made["job"]["payload"] == EXACT
    inline = "max: 18446744073709551615, min: -9223372036854775808, float: 1.5"
    doc = inline_enqueue(job_type, "{" + inline + "}", "job { payload }")
    assert server.gql(doc, key=producer)["enqueueJob"]["job"]["payload"] == {
        "max": 2**64 - 1,
        "min": -(2**63),
        "float": 1.5,
    }
    job_id = server.gql(CLAIM, {"t": [job_type]}, worker)["claimJob"]["job"]["id"]
    done = server.gql(COMPLETE, {"id": job_id, "r": EXACT}, worker)["completeJob"]
    assert done == {"job": {"result": EXACT}, "userErrors": []}


@pytest.mark.parametrize("value", [BIG, -(2**63) - 1, 123456789012345678901234567890])
def test_an_integer_beyond_64_bits_is_refused_on_every_path(
    server: LiveServer, job_type: str, keys: tuple[str, str], value: int
) -> None:
    producer, worker = keys
    refused = [("VALIDATION_FAILED", ["input", "payload"])]
    # Variables over POST, at the top and nested.
    for payload in ({"n": value}, {"deep": [{"n": [value]}]}):
        out = enqueue(server, producer, type=job_type, payload=payload)
        assert codes(out) == refused and out["job"] is None, out
    # An inline literal.
    doc = inline_enqueue(job_type, f"{{n: {value}}}", "userErrors { code field }")
    assert codes(server.gql(doc, key=producer)["enqueueJob"]) == refused
    # A batch.
    batch = [{"type": job_type}, {"type": job_type, "payload": {"n": value}}]
    out = server.gql(ENQUEUE_MANY, {"i": batch}, producer)["enqueueJobs"]
    assert codes(out) == [("VALIDATION_FAILED", ["inputs", "1", "payload"])] and out["jobs"] == []
    # A result.
    assert enqueue(server, producer, type=job_type)["userErrors"] == []
    job_id = server.gql(CLAIM, {"t": [job_type]}, worker)["claimJob"]["job"]["id"]
    out = server.gql(COMPLETE, {"id": job_id, "r": {"n": value}}, worker)["completeJob"]
    assert codes(out) == [("VALIDATION_FAILED", ["result"])]
    # Nothing of it was stored.
    stats = server.gql(
        "query($t: String) { queueStats(type: $t) { pending running completed } }",
        {"t": job_type},
        producer,
    )
    assert stats["queueStats"] == {"pending": 0, "running": 1, "completed": 0}


async def test_an_integer_beyond_64_bits_is_refused_over_websocket(
    server: LiveServer, job_type: str, keys: tuple[str, str]
) -> None:
    producer, _ = keys
    async with ws(server, producer) as client:
        variables = {"i": {"type": job_type, "payload": {"n": BIG}}}
        payload = {"query": ENQUEUE, "variables": variables}
        await client.conn.send(json.dumps({"id": "1", "type": "subscribe", "payload": payload}))
        message = await client.receive()
        assert message["id"] == "1" and message["type"] == "next", message
        out = message["payload"]["data"]["enqueueJob"]
        assert codes(out) == [("VALIDATION_FAILED", ["input", "payload"])]


def test_get_reads_variables_exactly(server: LiveServer, keys: tuple[str, str]) -> None:
    """GET's variables are read as POST's are: an integer past 64 bits stays an integer
    (and is refused as one), never rounded to a float that might pass."""
    query = "query($n: Int) { jobs(first: $n) { totalCount } }"
    got = CLIENT.get(
        server.url,
        params={"query": query, "variables": '{"n": 18446744073709551616}'},
        headers={"Authorization": f"Bearer {keys[0]}"},
    ).json()
    assert got["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT", got
    assert "18446744073709551616" in got["errors"][0]["message"], got


@pytest.mark.parametrize("literal", ["1e400", "-1e400", "[1, 1e999]"])
def test_an_infinite_number_is_refused_never_stored_as_null(
    server: LiveServer, job_type: str, keys: tuple[str, str], literal: str
) -> None:
    producer, worker = keys
    # Inline, where the document's number becomes an infinity.
    doc = inline_enqueue(job_type, f"{{n: {literal}}}", "job { id } userErrors { code field }")
    out = server.gql(doc, key=producer)["enqueueJob"]
    assert codes(out) == [("VALIDATION_FAILED", ["input", "payload"])] and out["job"] is None
    # In variables, which no JSON reader here takes as a number: a malformed request.
    response = CLIENT.post(
        server.url,
        content=(
            '{"query": "mutation($i: EnqueueJobInput!) { enqueueJob(input: $i) { job { id } } }",'
            f' "variables": {{"i": {{"type": "{job_type}", "payload": {{"n": {literal}}}}}}}}}'
        ),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {producer}"},
    )
    assert response.status_code == 400, response.text
    # A result, inline.
    assert enqueue(server, producer, type=job_type)["userErrors"] == []
    job_id = server.gql(CLAIM, {"t": [job_type]}, worker)["claimJob"]["job"]["id"]
    doc = f'mutation {{ completeJob(id: "{job_id}", result: {{n: {literal}}}) {{ {ERRORS} }} }}'
    out = server.gql(doc, key=worker)["completeJob"]
    assert codes(out) == [("VALIDATION_FAILED", ["result"])]


# -- depth ------------------------------------------------------------------------------------


def test_a_payload_at_the_depth_limit_is_stored_hashed_and_served(
    server: LiveServer, job_type: str, keys: tuple[str, str]
) -> None:
    producer, worker = keys
    deepest = nested(JSON_MAX_DEPTH)
    first = enqueue(server, producer, type=job_type, payload=deepest, idempotencyKey="deep")
    assert first["userErrors"] == [] and first["created"] is True
    assert first["job"]["payload"] == deepest
    again = enqueue(server, producer, type=job_type, payload=deepest, idempotencyKey="deep")
    assert again["created"] is False and again["job"]["id"] == first["job"]["id"]
    other = enqueue(server, producer, type=job_type, payload=nested(3), idempotencyKey="deep")
    assert codes(other) == [("IDEMPOTENCY_KEY_REUSED", ["input", "idempotencyKey"])]
    batch = [{"type": job_type, "payload": deepest, "idempotencyKey": "deep-batch"}]
    out = server.gql(ENQUEUE_MANY, {"i": batch}, producer)["enqueueJobs"]
    assert out["userErrors"] == [] and out["jobs"][0]["payload"] == deepest
    job_id = server.gql(CLAIM, {"t": [job_type]}, worker)["claimJob"]["job"]["id"]
    done = server.gql(COMPLETE, {"id": job_id, "r": deepest}, worker)["completeJob"]
    assert done == {"job": {"result": deepest}, "userErrors": []}


@pytest.mark.parametrize("levels", [JSON_MAX_DEPTH + 1, 253, 254, 600])
def test_a_payload_past_the_depth_limit_is_refused_never_a_server_error(
    server: LiveServer, job_type: str, keys: tuple[str, str], levels: int
) -> None:
    producer, worker = keys
    deep = nested(levels)
    for key in (None, f"deep-{levels}"):
        fields: dict[str, Any] = {"type": job_type, "payload": deep}
        if key is not None:
            fields["idempotencyKey"] = key
        out = send(server, ENQUEUE, {"i": fields}, producer).json()
        assert "errors" not in out, out
        assert codes(out["data"]["enqueueJob"]) == [("VALIDATION_FAILED", ["input", "payload"])]
    listed = [{"type": job_type, "payload": {"list": [deep]}, "idempotencyKey": "l"}]
    out = server.gql(ENQUEUE_MANY, {"i": listed}, producer)["enqueueJobs"]
    assert codes(out) == [("VALIDATION_FAILED", ["inputs", "0", "payload"])]
    assert enqueue(server, producer, type=job_type)["userErrors"] == []
    job_id = server.gql(CLAIM, {"t": [job_type]}, worker)["claimJob"]["job"]["id"]
    out = server.gql(COMPLETE, {"id": job_id, "r": [deep]}, worker)["completeJob"]
    assert codes(out) == [("VALIDATION_FAILED", ["result"])]


def test_the_request_hash_is_unchanged_for_keys_used_before() -> None:
    """Hashing around the payload's own text gives the digest the whole object gave, so a
    retry with an idempotency key stored by an earlier version still matches."""
    request = EnqueueRequest(
        type="email",
        payload={"b": [1, {"z": 1, "a": 2}], "a": None},
        priority=Priority.HIGH,
        max_retries=3,
        run_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    )
    digest = "424edcd999187cac4dc4ba7de5b78071a41c4968f150fc2e82b674e5f7fac1f9"
    assert request_hash(request) == digest
