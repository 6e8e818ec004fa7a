"""uvicorn as `queuelog serve` runs it: bounds on slow and numerous clients.

uvicorn bounds the idle time between requests on a connection (`timeout_keep_alive`) but
neither the time a request takes to arrive nor how many connections are open. Here:

- each request, headers and body, must arrive whole within `http_request_timeout_seconds`
  of its first byte (a new connection must start one within that time too): a request
  whose headers are late is answered 408; one whose body is late has its connection closed;
- a request's headers may take at most `http_max_header_bytes`: more is answered 431;
- at most `max_connections` connections (HTTP and WebSocket) are open at once: one more is
  answered 503 and closed before anything of it is read;
- a client that goes away while its request body is being read ends that request quietly.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from typing import Any

import uvicorn
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from queuelog.config import Settings

log = logging.getLogger("queuelog.serve")

# File descriptors kept for what is not a client connection: the database pool, the log,
# listeners.
FD_RESERVE = 128


def _plain_response(status: str, text: str) -> bytes:
    body = text.encode()
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body


class BoundedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the bounds of this module (set by `bounded_protocol`)."""

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


def bounded_protocol(settings: Settings) -> type[BoundedHttpProtocol]:
    """The protocol class with `settings`' bounds, the connection limit within the file
    descriptors this process may open."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = settings.max_connections
    if soft != resource.RLIM_INFINITY and limit > soft - FD_RESERVE:
        limit = max(1, soft - FD_RESERVE)
        log.warning(
            "QUEUELOG_MAX_CONNECTIONS=%d is over what the file descriptor limit (%d) allows: "
            "using %d",
            settings.max_connections,
            soft,
            limit,
        )
    attributes = {
        "request_timeout": settings.http_request_timeout_seconds,
        "max_header_bytes": settings.http_max_header_bytes,
        "max_connections": limit,
    }
    return type("QueuelogHttpProtocol", (BoundedHttpProtocol,), attributes)


class QuietDisconnects:
    """A client that goes away while its request is read ends the request, not in a
    traceback: nobody is left to answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except ClientDisconnect:
            if scope["type"] != "http":
                raise


def uvicorn_config(
    app: ASGIApp, settings: Settings, host: str, port: int, log_level: str
) -> uvicorn.Config:
    log_options: dict[str, Any] = {}
    if settings.log_format == "json":
        from queuelog.logs import json_log_config

        log_options["log_config"] = json_log_config(log_level)
    return uvicorn.Config(
        QuietDisconnects(app),
        host=host,
        port=port,
        log_level=log_level,
        **log_options,
        http=bounded_protocol(settings),
        timeout_keep_alive=settings.http_keep_alive_seconds,
        ws_max_size=settings.request_max_bytes,
        ws_ping_interval=settings.ws_ping_interval_seconds,
        ws_ping_timeout=20.0,
        timeout_graceful_shutdown=10,
    )
