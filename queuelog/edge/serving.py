"""uvicorn as `queuelog serve` runs it: bounds on slow and numerous clients.

With QUEUELOG_BOUNDED_HTTP_PROTOCOL on (the default), the fence in
`queuelog.fences.uvicorn_http` bounds the time a request takes to arrive (408), the size of
its headers (431), and the connections open at once (503 before anything is read). Off, or
when the fence cannot be used with the installed uvicorn, uvicorn's own protocol serves with
its public settings: `limit_concurrency` answers 503 to a request that arrives while
`max_connections` connections are open, the header size is the HTTP parser's own limit
(`h11_max_incomplete_event_size` when uvicorn runs h11), and a request that arrives slowly is
not timed.

A client that goes away while its request body is being read ends that request quietly,
either way.
"""

from __future__ import annotations

import logging
import resource
from typing import Any

import uvicorn
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from queuelog import fences
from queuelog.config import Settings

log = logging.getLogger("queuelog.serve")

# File descriptors kept for what is not a client connection: the database pool, the log,
# listeners.
FD_RESERVE = 128


def connection_limit(settings: Settings) -> int:
    """`max_connections`, within the file descriptors this process may open."""
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
    return limit


def http_options(settings: Settings) -> dict[str, Any]:
    """uvicorn's HTTP settings: the bounded protocol when the fence is on and usable, else
    uvicorn's own protocol with the public settings nearest to it."""
    limit = connection_limit(settings)
    if settings.bounded_http_protocol:
        from queuelog.fences import uvicorn_http

        reason = fences.unavailable(
            "QUEUELOG_BOUNDED_HTTP_PROTOCOL", uvicorn_http.MISSING, uvicorn_http.TESTED
        )
        if reason is None:
            protocol = uvicorn_http.with_bounds(
                settings.http_request_timeout_seconds, settings.http_max_header_bytes, limit
            )
            return {"http": protocol}
    return {
        "http": "auto",
        "limit_concurrency": limit,
        "h11_max_incomplete_event_size": settings.http_max_header_bytes,
    }


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
        from queuelog.edge.logs import json_log_config

        log_options["log_config"] = json_log_config(log_level)
    return uvicorn.Config(
        QuietDisconnects(app),
        host=host,
        port=port,
        log_level=log_level,
        **log_options,
        **http_options(settings),
        timeout_keep_alive=settings.http_keep_alive_seconds,
        ws_max_size=settings.request_max_bytes,
        ws_ping_interval=settings.ws_ping_interval_seconds,
        ws_ping_timeout=20.0,
        timeout_graceful_shutdown=10,
    )
