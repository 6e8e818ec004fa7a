"""QUEUELOG_BOUNDED_HTTP_PROTOCOL: with the fence off, or unusable with the installed uvicorn,
uvicorn's own protocol serves, bounded by its public settings (the fence's own behaviour is
in test_slow_clients.py)."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import pytest

from queuelog import fences, serving
from queuelog.config import Settings
from queuelog.fences import uvicorn_http
from tests.security.conftest import start
from tests.security.http import send
from tests.support import LiveServer

MAX_CONNECTIONS = 20
HEAD = b"POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
BODY = b'{"query": "{ __typename }"}'


def _settings(**values: object) -> Settings:
    return Settings(database_url="sqlite:///unused.db", **values)  # type: ignore[arg-type]


def test_the_fence_is_used_when_on_and_tested(caplog: pytest.LogCaptureFixture) -> None:
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
def test_an_unusable_fence_falls_back_with_one_warning(
    cause: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    if cause == "untested version":
        monkeypatch.setattr(uvicorn_http, "TESTED", {"uvicorn": ("0.0.1",)})
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
    assert fences.untested_versions({"uvicorn": ("0.0.1",)}) == [
        f"uvicorn {__import__('uvicorn').__version__}"
    ]
    assert fences.untested_versions({"no-such-distribution-here": ("1",)}) == [
        "no-such-distribution-here (not installed)"
    ]


@pytest.fixture(scope="module")
def unfenced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from start(
        tmp_path_factory.mktemp("unfenced"),
        "sqlite",
        bounded_http_protocol=False,
        max_connections=MAX_CONNECTIONS,
        http_max_header_bytes=8192,
    )


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
