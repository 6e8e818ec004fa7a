"""One operation over either WebSocket protocol, as a raw client sends it: the first
message the server answers it with."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

from tests.support import LiveServer

PROTOCOLS = ("graphql-transport-ws", "graphql-ws")
# Messages that carry no answer to an operation: keep-alives of either protocol.
_KEEP_ALIVE = ("ka", "ping", "pong")


async def first_answer(
    server: LiveServer,
    key: str,
    query: str,
    protocol: str,
    variables: dict[str, Any] | None = None,
    operation_name: str | None = None,
) -> dict[str, Any]:
    """Authenticate with `key`, send `query` as operation "1", return the first message
    about it (`next`/`data`, `error` or `complete`)."""
    async with connect(server.ws_url, subprotocols=[Subprotocol(protocol)]) as conn:
        init = {"type": "connection_init", "payload": {"authorization": f"Bearer {key}"}}
        await conn.send(orjson.dumps(init).decode())
        payload: dict[str, Any] = {"query": query, "variables": variables or {}}
        if operation_name is not None:
            payload["operationName"] = operation_name
        start = "subscribe" if protocol == "graphql-transport-ws" else "start"
        acknowledged = False
        while True:
            async with asyncio.timeout(15):
                message = orjson.loads(await conn.recv())
            kind = message.get("type")
            if kind == "connection_ack" and not acknowledged:
                acknowledged = True
                await conn.send(
                    orjson.dumps({"id": "1", "type": start, "payload": payload}).decode()
                )
            elif kind not in _KEEP_ALIVE:
                assert acknowledged, message
                return dict(message)


def errors_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The GraphQL errors an answer carries, whichever protocol sent it."""
    payload = message.get("payload")
    if isinstance(payload, list):  # graphql-transport-ws `error`
        return payload
    if isinstance(payload, dict) and "errors" in payload:  # `next` / `data`
        return list(payload["errors"])
    if isinstance(payload, dict) and "message" in payload:  # graphql-ws `error`
        return [payload]
    raise AssertionError(f"no errors in {message}")
