"""The fences off: with QUEUELOG_BOUNDED_HTTP_PROTOCOL and QUEUELOG_STRICT_WEBSOCKET false, or a
fence unusable with the installed uvicorn or strawberry, the framework's own behaviour serves
(the fences' own behaviour is in test_slow_clients.py, test_websocket.py and
tests/subscriptions/). One server per backend with both switches off."""

from __future__ import annotations

import logging
import socket
import sys
from collections.abc import Iterator

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from queuelog.config import Settings
from queuelog.edge import serving, websocket
from queuelog.fences import strawberry_ws, uvicorn_http
from queuelog.fences.versions import untested_versions
from tests.security.conftest import start
from tests.security.http import send
from tests.subscriptions.wsclient import PROTOCOL, WS, claim, complete, enqueue, ws
from tests.support import BACKENDS, LiveServer

MAX_CONNECTIONS = 20
HEAD = b"POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
BODY = b'{"query": "{ __typename }"}'


@pytest.fixture(scope="module", params=BACKENDS)
def unfenced(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    yield from start(
        tmp_path_factory.mktemp(f"unfenced-{request.param}"),
        str(request.param),
        bounded_http_protocol=False,
        strict_websocket=False,
        max_connections=MAX_CONNECTIONS,
        http_max_header_bytes=8192,
    )


# -- HTTP: uvicorn's own protocol ---------------------------------------------------------------


def _settings(**values: object) -> Settings:
    return Settings(database_url="sqlite:///unused.db", **values)  # type: ignore[arg-type]


def test_the_http_fence_is_used_when_on_and_tested(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "queuelog.fences"):
        options = serving.http_options(_settings())
    protocol = options["http"]
    assert isinstance(protocol, type) and issubclass(protocol, uvicorn_http.BoundedHttpProtocol)
    assert caplog.records == []


def test_switched_off_uvicorn_serves_with_its_public_settings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "queuelog.fences"):
        options = serving.http_options(
            _settings(bounded_http_protocol=False, max_connections=77, http_max_header_bytes=9000)
        )
    assert options == {
        "http": "auto",
        "limit_concurrency": 77,
        "h11_max_incomplete_event_size": 9000,
    }
    assert caplog.records == []  # asked for: no warning


@pytest.mark.parametrize("cause", ["untested version", "failed import"])
def test_an_unusable_http_fence_falls_back_with_one_warning(
    cause: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    if cause == "untested version":
        monkeypatch.setattr(uvicorn_http, "TESTED", {"uvicorn": "==0.0.1"})
    else:
        monkeypatch.setattr(uvicorn_http, "MISSING", "ImportError: no httptools_impl")
    with caplog.at_level(logging.WARNING, "queuelog.fences"):
        options = serving.http_options(_settings(max_connections=33))
    assert options["http"] == "auto" and options["limit_concurrency"] == 33
    [record] = caplog.records
    assert "QUEUELOG_BOUNDED_HTTP_PROTOCOL is off" in record.getMessage()
    expected = "not tested with uvicorn " if cause == "untested version" else "no httptools_impl"
    assert expected in record.message


def test_untested_versions_names_the_installed_one() -> None:
    assert untested_versions({"uvicorn": "==0.0.1"}) == [
        f"uvicorn {__import__('uvicorn').__version__}"
    ]
    assert untested_versions({"no-such-distribution-here": "==1"}) == [
        "no-such-distribution-here (not installed)"
    ]


def _read_all(conn: socket.socket) -> bytes:
    chunks = []
    while chunk := conn.recv(65_536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_unfenced_requests_are_served(unfenced: LiveServer) -> None:
    assert send(unfenced, "{ __typename }").status_code == 200


def test_unfenced_a_request_over_the_connection_limit_is_answered_503(
    unfenced: LiveServer,
) -> None:
    held = [socket.create_connection(("127.0.0.1", unfenced.port)) for _ in range(MAX_CONNECTIONS)]
    try:
        with socket.create_connection(("127.0.0.1", unfenced.port), timeout=30) as extra:
            extra.sendall(HEAD + b"Content-Length: 27\r\nConnection: close\r\n\r\n" + BODY)
            assert _read_all(extra).startswith(b"HTTP/1.1 503 ")
    finally:
        for conn in held:
            conn.close()


def test_unfenced_headers_past_the_parser_limit_are_refused(unfenced: LiveServer) -> None:
    with socket.create_connection(("127.0.0.1", unfenced.port), timeout=30) as conn:
        conn.sendall(HEAD + b"X-Pad: " + b"a" * 200_000 + b"\r\n\r\n")
        answer = _read_all(conn)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]


# -- WebSocket: strawberry's own handlers ------------------------------------------------------


def test_the_websocket_fence_is_used_when_on_and_tested(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "queuelog.fences"):
        handlers = websocket.handler_classes(strict=True)
    assert handlers is not None
    transport, legacy = handlers
    assert issubclass(transport, strawberry_ws.TransportWSHandler)
    assert issubclass(legacy, strawberry_ws.LegacyWSHandler)
    assert transport.rules is websocket and legacy.rules is websocket
    assert caplog.records == []


def test_switched_off_strawberry_s_handlers_serve_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "queuelog.fences"):
        assert websocket.handler_classes(strict=False) is None
    assert caplog.records == []


@pytest.mark.parametrize("cause", ["untested version", "failed import"])
def test_an_unusable_websocket_fence_falls_back_with_one_warning(
    cause: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    if cause == "untested version":
        monkeypatch.setattr(strawberry_ws, "TESTED", {"strawberry-graphql": "==0.1.0"})
    else:  # importing the module fails, as when a release moves a handler
        monkeypatch.setitem(sys.modules, "queuelog.fences.strawberry_ws", None)
    with caplog.at_level(logging.WARNING, "queuelog.fences"):
        assert websocket.handler_classes(strict=True) is None
    [record] = caplog.records
    assert "QUEUELOG_STRICT_WEBSOCKET is off" in record.getMessage()


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
