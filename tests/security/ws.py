"""A raw client for both WebSocket subprotocols: any message, any shape."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from tests.support import LiveServer

TRANSPORT = "graphql-transport-ws"
LEGACY = "graphql-ws"
PROTOCOLS = (TRANSPORT, LEGACY)
_ids = itertools.count(1)


class Socket:
    """One connection speaking `protocol`."""

    def __init__(self, conn: ClientConnection, protocol: str) -> None:
        self.conn = conn
        self.protocol = protocol

    async def send(self, message: object) -> None:
        await self.conn.send(
            message if isinstance(message, str) else orjson.dumps(message).decode()
        )

    async def init(self, key: str | None) -> dict[str, Any]:
        """Send connection_init with `key`; the server's answer (ack or error)."""
        payload = {} if key is None else {"authorization": f"Bearer {key}"}
        await self.send({"type": "connection_init", "payload": payload})
        return await self.receive()

    async def receive(self, wait: float = 15) -> dict[str, Any]:
        """The next message that is not a keep-alive."""
        while True:
            async with asyncio.timeout(wait):
                message = orjson.loads(await self.conn.recv())
            if message.get("type") not in ("ka", "ping", "pong"):
                return dict(message)

    async def closed(self, wait: float = 15) -> tuple[int, str]:
        """The close code and reason the server ends the connection with; fails when it
        does not within `wait` seconds (messages before the close are skipped)."""
        try:
            async with asyncio.timeout(wait):
                while True:
                    await self.conn.recv()
        except ConnectionClosed as closed:
            assert closed.rcvd is not None, "closed without a close frame"
            return closed.rcvd.code, closed.rcvd.reason
        raise AssertionError("unreachable")

    def start_message(self, op: str, payload: object) -> dict[str, Any]:
        kind = "subscribe" if self.protocol == TRANSPORT else "start"
        return {"id": op, "type": kind, "payload": payload}

    async def operation(
        self, query: object, variables: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Run one operation; every message of it until its end (complete or error)."""
        op = f"op{next(_ids)}"
        await self.send(self.start_message(op, {"query": query, "variables": variables}))
        messages = []
        while True:
            message = await self.receive()
            assert message.get("id") == op, message
            messages.append(message)
            if message["type"] in ("complete", "error"):
                return messages


def errors_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The GraphQL errors an operation's messages carry, whatever the protocol."""
    found: list[Any] = []
    for m in messages:
        payload = m.get("payload")
        if m["type"] == "error":
            found.extend(payload if isinstance(payload, list) else [payload])
        elif isinstance(payload, dict):
            found.extend(payload.get("errors") or [])
    return found


@asynccontextmanager
async def opened(server: LiveServer, protocol: str) -> AsyncIterator[Socket]:
    async with connect(server.ws_url, subprotocols=[Subprotocol(protocol)]) as conn:
        assert conn.subprotocol == protocol
        yield Socket(conn, protocol)


@asynccontextmanager
async def acknowledged(server: LiveServer, protocol: str, key: str) -> AsyncIterator[Socket]:
    async with opened(server, protocol) as socket:
        ack = await socket.init(key)
        assert ack["type"] == "connection_ack", ack
        yield socket
