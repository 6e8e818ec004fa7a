"""No security property depends on a fence: with every fence and the fast path off
(QUEUELOG_BOUNDED_HTTP_PROTOCOL, QUEUELOG_STRICT_WEBSOCKET, QUEUELOG_PREPARED_OPERATIONS all
false), authentication, authorization, revocation on open sockets (both subprotocols), the
query limits and error masking hold, on both backends. What the fences only harden is in
SECURITY.md."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.security.conftest import start
from tests.security.ws import PROTOCOLS, acknowledged, errors_of
from tests.subscriptions.conftest import cli
from tests.support import ADMIN_SECRET, BACKENDS, LiveServer

DEEP = "{ jobs { nodes { " + "events { job { " * 10 + "id" + " } }" * 10 + " } } }"
# Subscriptions, since strawberry's own legacy handler serves nothing else.
DEEP_SUBSCRIPTION = (
    "subscription { jobStatusChanged { job { "
    + "events { job { " * 10
    + "id"
    + " } }" * 10
    + " } } }"
)
SUBSCRIPTION = "subscription { jobStatusChanged { cursor } }"
REACH = 15.0  # seconds a revocation may take to reach the server, with slack for load


@pytest.fixture(scope="module", params=BACKENDS)
def fenceless(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    yield from start(
        tmp_path_factory.mktemp(f"fenceless-{request.param}"),
        str(request.param),
        bounded_http_protocol=False,
        strict_websocket=False,
        prepared_operations=False,
    )


def _codes(errors: list[dict[str, Any]]) -> list[str]:
    return [(e.get("extensions") or {}).get("code", "") for e in errors]


def test_every_fence_is_off(fenceless: LiveServer) -> None:
    ready = httpx.get(fenceless.url.replace("/graphql", "/readyz")).json()
    assert set(ready["fences"].values()) == {"switched off"}, ready


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_no_key_is_refused(fenceless: LiveServer, method: str) -> None:
    query = "{ jobs(first: 1) { totalCount } }"
    if method == "GET":
        response = httpx.get(fenceless.url, params={"query": query})
    else:
        response = fenceless.post(query)
    body = response.json()
    assert not body.get("data"), body  # nothing ran
    assert _codes(body["errors"]) == ["UNAUTHENTICATED"]


def test_a_role_is_held_to_its_fields_through_aliases_and_fragments(
    fenceless: LiveServer, job_type: str
) -> None:
    worker = fenceless.create_key("WORKER", [job_type])
    mutation = (
        'mutation { a: enqueueJob(input: {type: "' + job_type + '"}) { ...J } } '
        "fragment J on EnqueueJobPayload { job { id } }"
    )
    body = fenceless.post(mutation, key=worker).json()
    assert body["data"] is None or body["data"].get("a") is None
    assert _codes(body["errors"]) == ["FORBIDDEN"]
    assert "this needs a producer or admin key" in body["errors"][0]["message"]
    keys = fenceless.post("{ k: apiKeys { name } }", key=worker).json()
    assert _codes(keys["errors"]) == ["FORBIDDEN"]


def test_the_query_limits_hold(fenceless: LiveServer) -> None:
    body = fenceless.post(DEEP, key=ADMIN_SECRET).json()
    assert "data" not in body
    assert set(_codes(body["errors"])) == {"QUERY_TOO_COMPLEX"}


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_the_query_limits_hold_on_each_subprotocol(
    fenceless: LiveServer, protocol: str
) -> None:
    async with acknowledged(fenceless, protocol, ADMIN_SECRET) as socket:
        messages = await socket.operation(DEEP_SUBSCRIPTION)
    assert "QUERY_TOO_COMPLEX" in _codes(errors_of(messages)), messages


def test_unexpected_errors_are_masked(fenceless: LiveServer) -> None:
    # A cursor that decodes to nonsense reaches the service; no internals come back.
    body = fenceless.post('{ jobs(after: "////") { totalCount } }', key=ADMIN_SECRET).json()
    for error in body.get("errors", []):
        assert "Traceback" not in error["message"] and "sqlalchemy" not in error["message"]
        if error["extensions"]["code"] == "INTERNAL_SERVER_ERROR":
            assert error["message"] == "Internal server error"


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_open_subscription_ends_when_another_process_revokes_its_key(
    fenceless: LiveServer, protocol: str, job_type: str
) -> None:
    name = fenceless.unique_name("watcher")
    key = fenceless.create_key("PRODUCER", [job_type], name=name)
    async with acknowledged(fenceless, protocol, key) as socket:
        await socket.send(socket.start_message("watch", {"query": SUBSCRIPTION}))
        await asyncio.sleep(0.2)  # the subscription is following the feed
        cli(fenceless, "keys", "revoke", name)
        messages: list[dict[str, Any]] = []
        while not messages or messages[-1]["type"] not in ("complete", "error"):
            messages.append(await socket.receive(wait=REACH))
        # and no new operation runs on the socket
        refused: list[dict[str, Any]] = []
        deadline = asyncio.get_running_loop().time() + REACH
        while asyncio.get_running_loop().time() < deadline:
            refused = await socket.operation(SUBSCRIPTION)
            if "UNAUTHENTICATED" in _codes(errors_of(refused)):
                break
            await asyncio.sleep(0.1)
        assert "UNAUTHENTICATED" in _codes(errors_of(refused)), refused
