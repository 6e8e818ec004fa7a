"""The fence around uvicorn's HTTP protocol: the bounds on slow and numerous clients that
uvicorn's settings do not offer, as a subclass of its httptools protocol (an internal
module of uvicorn). Only this module imports it.

uvicorn bounds the idle time between requests on a connection (`timeout_keep_alive`) but
neither the time a request takes to arrive nor how many connections are open. Here:

- each request, headers and body, must arrive whole within `request_timeout` of its first
  byte (a new connection must start one within that time too): a request whose headers are
  late is answered 408; one whose body is late has its connection closed;
- a request's headers may take at most `max_header_bytes`: more is answered 431;
- at most `max_connections` connections (HTTP and WebSocket) are open at once: one more is
  answered 503 and closed before anything of it is read.

`queuelog.edge.serving` uses it when QUEUELOG_BOUNDED_HTTP_PROTOCOL is on and `MISSING` is None
and the installed versions are in `TESTED`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

# The releases the protocol below is tested with, by distribution (`make test-newest` runs
# its tests against the newest ones).
TESTED: Mapping[str, str] = {"uvicorn": ">=0.54,<0.56", "httptools": ">=0.9,<0.10"}

MISSING: str | None = None
try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError as exc:  # a release moved it, or httptools is not installed
    MISSING = f"{type(exc).__name__}: {exc}"
    HttpToolsProtocol = object  # type: ignore[assignment,misc]


def _plain_response(status: str, text: str) -> bytes:
    body = text.encode()
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body


class BoundedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the bounds of this module (set by `with_bounds`)."""

    request_timeout: float = 30.0
    max_header_bytes: int = 65_536
    max_connections: int = 4_096

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._head_bytes: int | None = None  # bytes of headers so far; None once complete

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            transport.write(
                _plain_response("503 Service Unavailable", "too many connections; retry later")
            )
            transport.close()
            return
        self._head_bytes = 0
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._head_bytes is not None:
            room = self.max_header_bytes - self._head_bytes
            # The chunk may carry the end of the headers and then body bytes.
            if len(data) > room and b"\r\n\r\n" not in data[: room + 4]:
                self._refuse("431 Request Header Fields Too Large", "request headers too large")
                return
            self._head_bytes += len(data)
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head_bytes is None:
            self._head_bytes = 0
        self._arm()

    def on_headers_complete(self) -> None:
        self._head_bytes = None
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def handle_websocket_upgrade(self) -> None:
        self._disarm()
        super().handle_websocket_upgrade()

    def _arm(self) -> None:
        if self._deadline is None:
            self._deadline = self.loop.call_later(self.request_timeout, self._late)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _late(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._head_bytes is not None:  # the headers are not all here
            self._refuse("408 Request Timeout", "the request did not arrive in time")
        else:  # the body is late: the application sees the client go away
            self.transport.close()

    def _refuse(self, status: str, text: str) -> None:
        self._disarm()
        self.transport.write(_plain_response(status, text))
        self.transport.close()


def with_bounds(
    request_timeout: float, max_header_bytes: int, max_connections: int
) -> type[BoundedHttpProtocol]:
    """The protocol class with these bounds, for uvicorn's `http` setting."""
    attributes = {
        "request_timeout": request_timeout,
        "max_header_bytes": max_header_bytes,
        "max_connections": max_connections,
    }
    return type("QueuelogHttpProtocol", (BoundedHttpProtocol,), attributes)
