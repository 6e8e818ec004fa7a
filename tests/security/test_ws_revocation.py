"""A key revoked by another process stops working on an open WebSocket for every operation,
within the bound HTTP has (the key cache's), on both subprotocols and both backends.

SQLite: `queuelog keys revoke` beside the server. PostgreSQL: `revokeApiKey` on another
replica of the same database."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.security.ws import PROTOCOLS, Socket, acknowledged, errors_of
from tests.subscriptions.conftest import cli
from tests.support import ADMIN_SECRET, LiveServer

QUERY = "{ viewer { name } }"
MUTATION = 'mutation { enqueueJob(input: {type: "%s"}) { job { id } } }'  # % the job type
SUBSCRIPTION = "subscription { jobStatusChanged { cursor } }"
# How long a revocation may take to reach this server (HTTP's bound is the key cache's
# second; the rest is slack for a loaded machine).
REACH = 15.0


@pytest.fixture
def replicas(server: LiveServer, sibling: LiveServer) -> tuple[LiveServer, Callable[[str], None]]:
    """A server, and how another process revokes a key on its database."""
    other = sibling if server.db_url.startswith("postgresql") else None

    def revoke(name: str) -> None:
        if other is None:
            cli(server, "keys", "revoke", name)
        else:
            out = other.gql(
                "mutation($n: String!) { revokeApiKey(name: $n) }", {"n": name}, ADMIN_SECRET
            )
            assert out == {"revokeApiKey": True}

    return server, revoke


def _refused(messages: list[dict[str, Any]]) -> bool:
    codes = [(e.get("extensions") or {}).get("code") for e in errors_of(messages)]
    return "UNAUTHENTICATED" in codes


async def _until_refused(socket: Socket, query: str) -> float:
    """Seconds until `query` on `socket` is refused as unauthenticated."""
    began = time.monotonic()
    while time.monotonic() - began < REACH:
        if _refused(await socket.operation(query)):
            return time.monotonic() - began
        await asyncio.sleep(0.1)
    raise AssertionError(f"{query} still ran {REACH} s after the key was revoked")


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_every_operation_is_refused_once_another_process_revokes_the_key(
    replicas: tuple[LiveServer, Callable[[str], None]], protocol: str, job_type: str
) -> None:
    server, revoke = replicas
    name = server.unique_name("revoked")
    key = server.create_key("PRODUCER", [job_type], name=name)
    mutation = MUTATION % job_type
    async with acknowledged(server, protocol, key) as socket:
        ran = await socket.operation(QUERY)
        assert errors_of(ran) == [], ran
        revoke(name)
        await _until_refused(socket, mutation)
        # and from then on, every kind of operation
        for query in (QUERY, mutation, SUBSCRIPTION):
            refused = await socket.operation(query)
            assert _refused(refused), (query, refused)
            assert "revoked" in errors_of(refused)[0]["message"]
    assert server.gql("{ jobs(first: 1) { totalCount } }", key=ADMIN_SECRET)  # still serving


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_open_subscription_ends_once_another_process_revokes_the_key(
    replicas: tuple[LiveServer, Callable[[str], None]], protocol: str, job_type: str
) -> None:
    server, revoke = replicas
    name = server.unique_name("watcher")
    key = server.create_key("PRODUCER", [job_type], name=name)
    async with acknowledged(server, protocol, key) as socket:
        await socket.send(socket.start_message("watch", {"query": SUBSCRIPTION}))
        await asyncio.sleep(0.2)  # the subscription is following the feed
        revoke(name)
        messages: list[dict[str, Any]] = []
        while not messages or messages[-1]["type"] not in ("complete", "error"):
            messages.append(await socket.receive(wait=REACH))
        assert _refused(messages), messages
