"""What the server logs of errors: a client's mistake is one line without a traceback, a
fault of the server a traceback, and no payload, variable's value, result or job error text
is ever logged, over HTTP and both WebSocket subprotocols, with the fast path on and off.

In-process server (`inprocess.live`) so that its log records can be captured."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import orjson
import pytest
from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

from queuelog.config import Settings
from queuelog.runtime import Services
from queuelog.service.models import Role
from tests.support import LiveServer

SECRET = "SECRET-VAR-456"
ENQUEUE = """mutation($input: EnqueueJobInput!) {
  enqueueJob(input: $input) { job { id } userErrors { code } } }"""
# Each is refused before or while it runs, with its code.
CLIENT_ERRORS: list[tuple[str, str, dict[str, Any], str]] = [
    ("no key", "{ viewer { name } }", {}, "UNAUTHENTICATED"),
    ("worker enqueues", ENQUEUE, {"input": {"type": "email"}}, "FORBIDDEN"),
    ("invalid document", "{ viewer { nme } }", {}, "GRAPHQL_VALIDATION_FAILED"),
    (
        "variables that do not coerce",
        ENQUEUE,
        {"input": {"type": "email", "payload": {"dbPassword": SECRET}, "priority": SECRET}},
        "BAD_USER_INPUT",
    ),
    ("too many aliases", "{ " + " ".join(f"a{i}: __typename" for i in range(40)) + " }", {}, ""),
    ("a literal that is no ID", f'{{ job(id: {{dbPassword: "{SECRET}"}}) {{ id }} }}', {}, ""),
]


@pytest.fixture(params=[True, False], ids=["fast path", "generic path"])
def settings(db_url: str, request: pytest.FixtureRequest) -> Settings:
    return Settings(
        database_url=db_url,
        job_types=("email", "pdf", "sync"),
        prepared_operations=request.param,
        max_aliases=15,
    )


async def _http(server: LiveServer, query: str, variables: dict[str, Any], key: str | None) -> Any:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient() as client:
        body = {"query": query, "variables": variables}
        return (await client.post(server.url, json=body, headers=headers)).json()


async def _ws(
    server: LiveServer, protocol: str, query: str, variables: dict[str, Any], key: str
) -> list[dict[str, Any]]:
    """The messages of one operation up to its end."""
    async with connect(server.ws_url, subprotocols=[Subprotocol(protocol)]) as conn:
        init = {"type": "connection_init", "payload": {"authorization": f"Bearer {key}"}}
        await conn.send(orjson.dumps(init).decode())
        start = "start" if protocol == "graphql-ws" else "subscribe"
        payload = {"query": query, "variables": variables}
        await conn.send(orjson.dumps({"type": start, "id": "1", "payload": payload}).decode())
        out = []
        while True:
            message = orjson.loads(await conn.recv())
            if message.get("id") == "1":
                out.append(message)
                if message["type"] in ("complete", "error"):
                    return out


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith(("queuelog", "strawberry"))]


def _no_secret_and_no_traceback(records: list[logging.LogRecord]) -> None:
    for record in records:
        text = record.getMessage() + (str(record.exc_info[1]) if record.exc_info else "")
        assert SECRET not in text, record.getMessage()
        assert record.exc_info is None, (record.getMessage(), record.exc_info)


@pytest.mark.parametrize("case", CLIENT_ERRORS, ids=[c[0] for c in CLIENT_ERRORS])
async def test_a_client_error_logs_one_line_without_traceback_or_values(
    live: tuple[LiveServer, str],
    services: Services,
    caplog: pytest.LogCaptureFixture,
    case: tuple[str, str, dict[str, Any], str],
) -> None:
    server, admin = live
    _, worker = await services.keys.create("w", Role.WORKER)
    name, query, variables, code = case
    key = None if name == "no key" else worker if name == "worker enqueues" else admin
    caplog.set_level(logging.DEBUG)

    body = await _http(server, query, variables, key)
    assert body.get("errors"), body
    if code:
        assert body["errors"][0]["extensions"]["code"] == code, body
    records = _lines(caplog)
    _no_secret_and_no_traceback(records)
    assert len(records) == 1, [r.getMessage() for r in records]
    if code:
        assert code in records[0].getMessage()

    if key is None:
        return
    for protocol in ("graphql-ws", "graphql-transport-ws"):
        caplog.clear()
        messages = await _ws(server, protocol, query, variables, key)
        assert any("error" in m["type"] or m["payload"].get("errors") for m in messages), messages
        records = _lines(caplog)
        _no_secret_and_no_traceback(records)
        assert len(records) <= 1, (protocol, [r.getMessage() for r in records])


async def test_a_fault_of_the_server_logs_its_traceback_and_is_masked(
    live: tuple[LiveServer, str],
    services: Services,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, admin = live

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the disk is on fire")

    monkeypatch.setattr(services.service, "counts", broken)
    caplog.set_level(logging.DEBUG)
    body = await _http(server, "{ queueStats { pending } }", {}, admin)
    assert body["errors"][0]["extensions"]["code"] == "INTERNAL_SERVER_ERROR", body
    assert "fire" not in str(body)
    faults = [r for r in _lines(caplog) if r.exc_info]
    assert len(faults) == 1 and "fire" in str(faults[0].exc_info[1])  # type: ignore[index]
