"""Slow and numerous clients against a real `queuelog serve`: requests must arrive in time,
headers are bounded, connections are counted, and clients that leave log nothing."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from tests.security.conftest import start
from tests.security.http import send
from tests.support import LiveServer

REQUEST_TIMEOUT = 1.0
MAX_CONNECTIONS = 40


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from start(
        tmp_path_factory.mktemp("bounded"),
        "sqlite",
        http_request_timeout_seconds=REQUEST_TIMEOUT,
        max_connections=MAX_CONNECTIONS,
        http_max_header_bytes=8192,
    )


@pytest.fixture
def quiet_log(bounded: LiveServer) -> Iterator[None]:
    before = len(bounded.log())
    yield
    time.sleep(0.2)  # let the server finish with the test's connections
    assert "Traceback" not in bounded.log()[before:], bounded.log()[before:]


def _connect(server: LiveServer) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", server.port), timeout=REQUEST_TIMEOUT + 10)
    return conn


def _read_all(conn: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    chunks = []
    while chunk := conn.recv(65_536):
        chunks.append(chunk)
    return b"".join(chunks)


def _response(conn: socket.socket) -> bytes:
    """One whole response (status line, headers and body) off a kept-alive connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65_536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.lower().split(b"\r\n")
        if line.startswith(b"content-length:")
    )
    while len(body) < length:
        body += conn.recv(65_536)
    return head + b"\r\n\r\n" + body


HEAD = b"POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
BODY = b'{"query": "{ __typename }"}'


@pytest.mark.usefixtures("quiet_log")
@pytest.mark.parametrize(
    "sent",
    [b"", b"POST /gra", HEAD, HEAD + b"Content-Length: 27\r\n"],
    ids=["nothing", "request-line", "some-headers", "all-but-the-end"],
)
def test_headers_that_do_not_arrive_in_time_are_answered_408(
    bounded: LiveServer, sent: bytes
) -> None:
    with _connect(bounded) as conn:
        conn.sendall(sent)
        answer = _read_all(conn)  # the server closes the connection
    assert answer.startswith(b"HTTP/1.1 408 "), answer


@pytest.mark.usefixtures("quiet_log")
def test_headers_sent_a_byte_at_a_time_are_cut_off(bounded: LiveServer) -> None:
    request = HEAD + b"Content-Length: 27\r\n\r\n" + BODY
    with _connect(bounded) as conn:
        began = time.monotonic()
        try:
            for byte in request:
                conn.sendall(bytes([byte]))
                time.sleep(0.05)
                assert time.monotonic() - began < REQUEST_TIMEOUT + 10, "never cut off"
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = _read_all(conn)
    assert answer.startswith(b"HTTP/1.1 408 "), answer


@pytest.mark.usefixtures("quiet_log")
@pytest.mark.parametrize("body", [b"", b'{"query": "{'], ids=["none", "part"])
def test_a_body_that_does_not_arrive_in_time_closes_the_connection(
    bounded: LiveServer, body: bytes
) -> None:
    with _connect(bounded) as conn:
        conn.sendall(HEAD + b"Content-Length: 27\r\n\r\n" + body)
        assert _read_all(conn) == b""  # closed, nobody left to answer


@pytest.mark.usefixtures("quiet_log")
def test_a_client_leaving_mid_body_logs_no_traceback(bounded: LiveServer) -> None:
    for _ in range(5):
        with _connect(bounded) as conn:
            conn.sendall(HEAD + b"Content-Length: 2000\r\n\r\n" + BODY)
    assert send(bounded, "{ __typename }").status_code == 200


@pytest.mark.usefixtures("quiet_log")
def test_oversized_headers_are_answered_431(bounded: LiveServer) -> None:
    with _connect(bounded) as conn:
        conn.sendall(HEAD + b"X-Pad: " + b"a" * 10_000 + b"\r\n\r\n")
        assert _read_all(conn).startswith(b"HTTP/1.1 431 ")


@pytest.mark.usefixtures("quiet_log")
def test_a_large_body_with_its_headers_in_one_chunk_is_not_mistaken_for_headers(
    bounded: LiveServer,
) -> None:
    padding = b" " * 100_000
    body = b'{"query": "{ __typename }"' + padding + b"}"
    with _connect(bounded) as conn:
        conn.sendall(HEAD + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        assert _response(conn).startswith(b"HTTP/1.1 200 ")


@pytest.mark.usefixtures("quiet_log")
def test_connections_over_the_limit_are_refused_and_others_still_served(
    bounded: LiveServer,
) -> None:
    held = [_connect(bounded) for _ in range(MAX_CONNECTIONS)]
    try:
        with _connect(bounded) as extra:
            assert _read_all(extra).startswith(b"HTTP/1.1 503 ")
    finally:
        for conn in held:
            conn.close()
    # the idle ones are dropped in time, and the server serves again
    time.sleep(0.5)
    assert send(bounded, "{ __typename }").status_code == 200


@pytest.mark.usefixtures("quiet_log")
def test_a_keep_alive_connection_is_served_request_after_request(bounded: LiveServer) -> None:
    request = HEAD + b"Content-Length: 27\r\n\r\n" + BODY
    with _connect(bounded) as conn:
        for _ in range(3):
            conn.sendall(request)
            assert _response(conn).startswith(b"HTTP/1.1 200 ")
            time.sleep(REQUEST_TIMEOUT * 0.6)  # idle between requests: not a late request
