"""QUEUELOG_STRICT_WEBSOCKET: with the fence off, or unusable with the installed strawberry,
strawberry's own protocol handlers serve /graphql's WebSockets; subscriptions and keys still
work (the fence's own rules are in tests/security/test_websocket.py)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from queuelog import websocket
from queuelog.fences import strawberry_ws
from tests.subscriptions.wsclient import PROTOCOL, WS, claim, complete, enqueue, ws
from tests.support import BACKENDS, LiveServer, session_server


def test_the_fence_is_used_when_on_and_tested(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "queuelog.fences"):
        handlers = websocket.handler_classes(strict=True)
    assert handlers == (strawberry_ws.TransportWSHandler, strawberry_ws.LegacyWSHandler)
    assert caplog.records == []


def test_switched_off_strawberry_s_handlers_serve_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "queuelog.fences"):
        assert websocket.handler_classes(strict=False) is None
    assert caplog.records == []


@pytest.mark.parametrize("cause", ["untested version", "failed import"])
def test_an_unusable_fence_falls_back_with_one_warning(
    cause: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    if cause == "untested version":
        monkeypatch.setattr(strawberry_ws, "TESTED", {"strawberry-graphql": ("0.1.0",)})
    else:  # importing the module fails, as when a release moves a handler
        monkeypatch.setitem(sys.modules, "queuelog.fences.strawberry_ws", None)
    with caplog.at_level(logging.WARNING, "queuelog.fences"):
        assert websocket.handler_classes(strict=True) is None
    [record] = caplog.records
    assert "QUEUELOG_STRICT_WEBSOCKET is off" in record.getMessage()


@pytest.fixture(scope="module", params=BACKENDS)
def unfenced(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    yield from session_server(
        tmp_path_factory, str(request.param), f"unfenced-{request.param}", strict_websocket=False
    )


async def test_unfenced_a_subscriber_sees_a_job_s_life(unfenced: LiveServer, job_type: str) -> None:
    producer = unfenced.create_key("PRODUCER", [job_type])
    worker = unfenced.create_key("WORKER", [job_type])
    _, start = enqueue(unfenced, producer, job_type)
    async with ws(unfenced, producer) as client:
        op = await client.subscribe({"type": job_type, "after": start})
        job_id, _ = enqueue(unfenced, producer, job_type)
        claimed = claim(unfenced, worker, job_type)
        complete(unfenced, worker, claimed)
        seen = [(e["job"]["id"], e["status"]) for e in await client.events(op, 3)]
    assert seen == [(job_id, "PENDING"), (claimed, "RUNNING"), (claimed, "COMPLETED")]


async def test_unfenced_a_connection_without_a_key_is_refused(unfenced: LiveServer) -> None:
    async with connect(unfenced.ws_url, subprotocols=[PROTOCOL]) as conn:  # type: ignore[list-item]
        await WS(conn).send({"type": "connection_init", "payload": {}})
        with pytest.raises(ConnectionClosed) as closed:
            await conn.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403
