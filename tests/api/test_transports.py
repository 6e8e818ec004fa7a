"""Every transport answers alike: queries and mutations over both WebSocket subprotocols
(legacy `graphql-ws`, which gql offers first, and `graphql-transport-ws`), and errors
before execution carry the same `extensions.code` over WebSocket as over HTTP.

Runs on the session servers: SQLite with the fast path on, PostgreSQL with it off."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Subprotocol

from tests.support import ADMIN_SECRET, LiveServer

PROTOCOLS = ("graphql-ws", "graphql-transport-ws")
VIEWER = "{ viewer { name role } }"
ENQUEUE = """mutation($input: EnqueueJobInput!) {
  enqueueJob(input: $input) { job { id type status } userErrors { code } } }"""
INVALID = "{ viewer { nme } }"
BAD_VARIABLES = "query($n: Int!) { jobs(first: $n) { nodes { id } } }"


class Socket:
    """One acknowledged connection speaking `protocol`."""

    def __init__(self, conn: ClientConnection, protocol: str) -> None:
        self.conn = conn
        self.protocol = protocol
        self.ids = 0

    async def send(self, message: dict[str, Any]) -> None:
        await self.conn.send(orjson.dumps(message).decode())

    async def receive(self) -> dict[str, Any]:
        while True:
            async with asyncio.timeout(15):
                message = orjson.loads(await self.conn.recv())
            if message["type"] not in ("ka", "ping", "pong"):
                return dict(message)

    async def run(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """The operation's one result, as {"data": …, "errors": […]}, after its completion;
        an `error` message's errors as {"errors": […]}."""
        self.ids += 1
        op = str(self.ids)
        start = "start" if self.protocol == "graphql-ws" else "subscribe"
        payload = {"query": query, "variables": variables or {}}
        await self.send({"type": start, "id": op, "payload": payload})
        message = await self.receive()
        assert message["id"] == op, message
        if message["type"] == "error":
            errors = message["payload"]
            return {"errors": errors if isinstance(errors, list) else [errors]}
        assert message["type"] == ("data" if self.protocol == "graphql-ws" else "next"), message
        assert await self.receive() == {"type": "complete", "id": op}
        return dict(message["payload"])


async def _socket(server: LiveServer, protocol: str, key: str) -> tuple[ClientConnection, Socket]:
    conn = await connect(server.ws_url, subprotocols=[Subprotocol(protocol)])
    socket = Socket(conn, protocol)
    await socket.send({"type": "connection_init", "payload": {"authorization": f"Bearer {key}"}})
    assert (await socket.receive())["type"] == "connection_ack"
    return conn, socket


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_queries_and_mutations_run_over_both_websocket_protocols(
    server: LiveServer, job_type: str, protocol: str
) -> None:
    conn, socket = await _socket(server, protocol, ADMIN_SECRET)
    async with conn:
        viewer = await socket.run(VIEWER)
        assert viewer == {"data": {"viewer": {"name": "admin", "role": "ADMIN"}}}
        enqueued = await socket.run(ENQUEUE, {"input": {"type": job_type}})
        job = enqueued["data"]["enqueueJob"]
        assert "errors" not in enqueued and job["userErrors"] == [], enqueued
        assert job["job"]["type"] == job_type and job["job"]["status"] == "PENDING"
    # The mutation ran: the job is there over HTTP too.
    query = "query($id: ID!) { job(id: $id) { type } }"
    seen = server.gql(query, {"id": job["job"]["id"]}, ADMIN_SECRET)
    assert seen == {"job": {"type": job_type}}


def _codes(result: dict[str, Any]) -> list[str]:
    return [e.get("extensions", {}).get("code") for e in result.get("errors") or []]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_errors_before_execution_carry_the_same_code_over_websocket_as_over_http(
    server: LiveServer, protocol: str
) -> None:
    cases: list[tuple[str, dict[str, Any], str]] = [
        (INVALID, {}, "GRAPHQL_VALIDATION_FAILED"),
        (BAD_VARIABLES, {"n": "x"}, "BAD_USER_INPUT"),
    ]
    conn, socket = await _socket(server, protocol, ADMIN_SECRET)
    async with conn:
        for query, variables, code in cases:
            over_http = server.post(query, variables, ADMIN_SECRET).json()
            over_ws = await socket.run(query, variables)
            assert _codes(over_http) == [code], over_http
            assert _codes(over_ws) == [code], (protocol, over_ws)
            assert over_ws["errors"][0]["message"] == over_http["errors"][0]["message"]
