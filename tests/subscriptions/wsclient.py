"""A small graphql-transport-ws client over `websockets`, and helpers the tests share."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect

from tests.support import LiveServer

PROTOCOL = "graphql-transport-ws"
EVENTS = """subscription($jobId: ID, $type: String, $statuses: [JobStatus!], $after: String) {
  jobStatusChanged(jobId: $jobId, type: $type, statuses: $statuses, after: $after) {
    cursor previousStatus status occurredAt job { id type }
  }
}"""
ENQUEUE = """mutation($input: EnqueueJobInput!) {
  enqueueJob(input: $input) { job { id events { cursor } } userErrors { code } }
}"""
CLAIM = "mutation($t: [String!]) { claimJob(types: $t) { job { id } userErrors { code } } }"
COMPLETE = "mutation($id: ID!) { completeJob(id: $id) { job { status } userErrors { code } } }"
FAIL = """mutation($id: ID!) {
  failJob(id: $id, error: "boom", retryable: false) { job { status } userErrors { code } }
}"""


class WS:
    """One connection: send operations, read messages (pongs skipped)."""

    def __init__(self, conn: ClientConnection) -> None:
        self.conn = conn
        self._ids = itertools.count(1)

    async def send(self, message: dict[str, Any]) -> None:
        await self.conn.send(orjson.dumps(message).decode())

    async def subscribe(self, variables: dict[str, Any], query: str = EVENTS) -> str:
        op = str(next(self._ids))
        payload = {"query": query, "variables": variables}
        await self.send({"id": op, "type": "subscribe", "payload": payload})
        return op

    async def receive(self, wait: float = 15) -> dict[str, Any]:
        while True:
            async with asyncio.timeout(wait):
                frame = await self.conn.recv()
            # graphql-transport-ws is text frames only: browser clients refuse binary ones.
            assert isinstance(frame, str), f"a binary frame: {frame!r}"
            message = orjson.loads(frame)
            if message["type"] not in ("ping", "pong"):
                return dict(message)

    async def take(self, n: int) -> list[dict[str, Any]]:
        return [await self.receive() for _ in range(n)]

    async def event(self, op: str, wait: float = 15) -> dict[str, Any]:
        """The next event of operation `op` (which must be a `next` with data)."""
        message = await self.receive(wait)
        assert message["id"] == op and message["type"] == "next", message
        assert "errors" not in message["payload"], message
        return dict(message["payload"]["data"]["jobStatusChanged"])

    async def events(self, op: str, n: int, wait: float = 15) -> list[dict[str, Any]]:
        return [await self.event(op, wait) for _ in range(n)]

    async def error(self, op: str) -> dict[str, Any]:
        """The error that ends operation `op`: its first GraphQL error, then `complete`."""
        message = await self.receive()
        assert message["id"] == op, message
        if message["type"] == "error":
            return dict(message["payload"][0])
        assert message["type"] == "next" and message["payload"].get("errors"), message
        done = await self.receive()
        assert done == {"id": op, "type": "complete"}, done
        return dict(message["payload"]["errors"][0])


@asynccontextmanager
async def ws(server: LiveServer, key: str | None, **kw: Any) -> AsyncIterator[WS]:
    """A connection that has been acknowledged (with `key` in connection_init)."""
    async with connect(server.ws_url, subprotocols=[PROTOCOL], **kw) as conn:  # type: ignore[list-item]
        client = WS(conn)
        payload = {} if key is None else {"authorization": f"Bearer {key}"}
        await client.send({"type": "connection_init", "payload": payload})
        ack = await client.receive()
        assert ack["type"] == "connection_ack", ack
        yield client


def enqueue(server: LiveServer, key: str, job_type: str) -> tuple[str, str]:
    """Enqueue a job; returns its id and the cursor of its creation event."""
    out = server.gql(ENQUEUE, {"input": {"type": job_type}}, key)["enqueueJob"]
    assert not out["userErrors"], out
    return out["job"]["id"], out["job"]["events"][-1]["cursor"]


def claim(server: LiveServer, key: str, job_type: str) -> str:
    out = server.gql(CLAIM, {"t": [job_type]}, key)["claimJob"]
    assert out["job"] is not None, out
    return str(out["job"]["id"])


def complete(server: LiveServer, key: str, job_id: str) -> None:
    out = server.gql(COMPLETE, {"id": job_id}, key)["completeJob"]
    assert not out["userErrors"], out


def history(server: LiveServer, key: str, job_id: str) -> list[str]:
    """The cursors of a job's events, through the HTTP API."""
    data = server.gql("query($id: ID!) { job(id: $id) { events { cursor } } }", {"id": job_id}, key)
    return [e["cursor"] for e in data["job"]["events"]]
