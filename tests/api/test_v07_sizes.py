"""V-07: unbounded payloads. Payloads and results are capped at 64 KiB serialized
(PAYLOAD_TOO_LARGE), request bodies at 2 MiB (HTTP 413 before anything parses them), and
WebSocket messages likewise."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.api.attack import CLIENT, COMPLETE, ENQUEUE, admin_job, claim, codes, enqueue, snapshot
from tests.support import ADMIN_SECRET, LiveServer

LIMIT = 65_536
BODY_LIMIT = 2 * 1024 * 1024
MY_JOBS = "{ jobs { totalCount } }"


def _payload(size: int, char: str = "a") -> dict[str, str]:
    """A JSON object whose compact serialization is exactly `size` bytes."""
    overhead = len('{"k":""}')
    width = len(char.encode())
    assert (size - overhead) % width == 0
    payload = {"k": char * ((size - overhead) // width)}
    assert len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()) == size
    return payload


def test_v07_payload_limit_is_64_kib(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    for payload in (_payload(LIMIT + 1), _payload(LIMIT + 2, "é"), {"k": "a" * 1_000_000}):
        out = enqueue(server, producer, type=job_type, payload=payload)
        assert out["job"] is None and codes(out) == ["PAYLOAD_TOO_LARGE"], out["userErrors"]
        assert out["userErrors"][0]["field"] == ["input", "payload"]
    assert server.gql(MY_JOBS, key=producer)["jobs"]["totalCount"] == 0

    exact = _payload(LIMIT)
    out = enqueue(server, producer, type=job_type, payload=exact)
    assert out["userErrors"] == [] and out["job"]["payload"] == exact
    assert admin_job(server, out["job"]["id"])["payload"] == exact


def test_v07_result_limit_on_complete(server: LiveServer, job_type: str) -> None:
    worker = server.create_key("WORKER", [job_type])
    enqueue(server, ADMIN_SECRET, type=job_type)
    job_id = claim(server, worker, [job_type])["job"]["id"]
    before = snapshot(server, job_type)

    out = server.gql(COMPLETE, {"id": job_id, "result": _payload(LIMIT + 1)}, worker)
    payload = out["completeJob"]
    assert codes(payload) == ["PAYLOAD_TOO_LARGE"] and payload["userErrors"][0]["field"] == [
        "result"
    ]
    assert snapshot(server, job_type) == before
    assert admin_job(server, job_id)["status"] == "RUNNING"

    exact = _payload(LIMIT)
    done = server.gql(COMPLETE, {"id": job_id, "result": exact}, worker)["completeJob"]
    assert done["userErrors"] == [] and done["job"]["result"] == exact


def _oversized_enqueue(job_type: str) -> bytes:
    """A valid enqueue, padded past the body limit with an unused variable: only the body
    limit stands between it and the queue."""
    body = {
        "query": ENQUEUE,
        "variables": {"input": {"type": job_type}, "padding": "x" * (BODY_LIMIT + 10)},
    }
    return json.dumps(body).encode()


@pytest.mark.parametrize("transfer", ["content-length", "chunked"])
def test_v07_request_body_over_2_mib_is_413(
    server: LiveServer, job_type: str, transfer: str
) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    body = _oversized_enqueue(job_type)

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(body), 64 * 1024):
            yield body[i : i + 64 * 1024]

    content: Any = body if transfer == "content-length" else chunks()
    resp = CLIENT.post(
        server.url,
        content=content,
        headers={"Authorization": f"Bearer {producer}", "Content-Type": "application/json"},
    )
    sent = resp.request.headers
    assert ("transfer-encoding" in sent) == (transfer == "chunked")
    assert resp.status_code == 413, resp.text
    assert resp.json()["errors"][0]["extensions"]["code"] == "PAYLOAD_TOO_LARGE"
    assert server.gql(MY_JOBS, key=producer)["jobs"]["totalCount"] == 0
    # The same request under the limit goes through: the limit, not the padding, refused it.
    small = json.loads(body)
    small["variables"]["padding"] = "x"
    ok = CLIENT.post(server.url, json=small, headers={"Authorization": f"Bearer {producer}"})
    assert ok.json()["data"]["enqueueJob"]["created"] is True


def test_v07_websocket_message_over_the_limit_closes(server: LiveServer) -> None:
    with connect(server.ws_url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
        ws.send(
            json.dumps(
                {"type": "connection_init", "payload": {"authorization": f"Bearer {ADMIN_SECRET}"}}
            )
        )
        assert json.loads(ws.recv(timeout=10))["type"] == "connection_ack"
        ws.send(json.dumps({"type": "ping", "payload": {"pad": "x" * (BODY_LIMIT + 10)}}))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
