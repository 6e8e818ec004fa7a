"""The Starlette application: GraphQL over HTTP and WebSocket at /graphql, GraphiQL,
health and readiness, metrics, CORS, the request-body limit, authentication, and the
background tasks of the lifespan.

Authentication errors follow one rule, the one GraphQL-over-HTTP gives every error: a key
that is sent and is not live (or not `Bearer`) is a request error, so nothing runs, answered
401 to clients that accept `application/graphql-response+json` (they read the body of any
status) and 200 to `application/json` clients (many show nothing of a non-2xx body). No key
at all is not an error: the request runs, and each field that needs a key answers a field
error. Both carry the code UNAUTHENTICATED, and a refusal repeats its message in
`WWW-Authenticate`. Over WebSocket a refused `connection_init` closes with 4401 (graphql-ws
clients then stop retrying) and a reason that says what was wrong. The REST routes
(`queuelog.edge.rest`) answer every refused key, and a missing one, 401 in their own shape."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.exceptions import ConnectionRejectionError
from strawberry.http import GraphQLHTTPResponse
from strawberry.types import ExecutionResult

from queuelog.api.resolvers.context import Context
from queuelog.api.schema import build_schema
from queuelog.auth.backend import (
    ApiKeyBackend,
    InvalidKey,
    Principal,
    TooManyFailures,
    bearer,
    client_address,
)
from queuelog.auth.ratelimit import RateLimited, TokenBuckets
from queuelog.config import Settings
from queuelog.domain.codes import ErrorCode
from queuelog.edge import dashboard, openapi, rest
from queuelog.edge.graphiql import ASSETS_PATH, GraphiQLAssets
from queuelog.edge.graphiql import page as graphiql_page
from queuelog.edge.health import Readiness, healthz
from queuelog.edge.http import (
    API_CSP,
    GRAPHQL_RESPONSE,
    EdgeHeaders,
    KeyRateLimit,
    error_response,
    is_rest,
    negotiate,
    page_csp,
    rate_limited,
)
from queuelog.edge.metrics import JobMetrics, MetricsEndpoint, process_exited, subscriptions_loop
from queuelog.edge.requests import BODY, OUTCOME, OperationLabels, OperationObserver, root_fields
from queuelog.edge.view import SpecGraphQL
from queuelog.edge.websocket import handler_classes
from queuelog.events.listen import listen
from queuelog.events.sessions import Session
from queuelog.runtime import Services, open_services
from queuelog.service.maintenance import maintenance_loop
from queuelog.service.observer import Observers
from queuelog.service.schedules import schedule_loop
from queuelog.storage.db import KEYS_CHANNEL, TYPES_CHANNEL
from queuelog.storage.migrate import migrate

NO_KEY = 'a live API key is required: send {"authorization": "Bearer <api key>"} in connection_init'


def _refuse(message: str, **payload: object) -> ConnectionRejectionError:
    """A refused connection_init: the WebSocket handlers close with `message` as the reason."""
    return ConnectionRejectionError({"message": message, **payload})


class QueuelogGraphQL(SpecGraphQL):
    def __init__(self, services: Services, **kwargs: Any) -> None:
        super().__init__(build_schema(services.settings), **kwargs)
        self.services = services
        st = services.settings
        handlers = handler_classes(st.strict_websocket)
        if handlers is not None:
            self.graphql_transport_ws_handler_class, self.graphql_ws_handler_class = handlers
        failures = TokenBuckets(st.auth_failures_per_minute / 60, st.auth_failure_burst)
        self.auth = ApiKeyBackend(services.keys, failures)
        self.key_buckets = TokenBuckets(st.rate_limit_per_second, st.rate_limit_burst)
        self.ide_page = graphiql_page() if self.graphql_ide else ""

    @property
    def graphql_ide_html(self) -> str:
        return self.ide_page

    async def process_result(
        self, request: Request, result: ExecutionResult
    ) -> GraphQLHTTPResponse:
        data = await super().process_result(request, result)
        # The outcome the metrics count (`queuelog.edge.requests`): no `data` means it never ran.
        outcome = "error" if "data" in data else "rejected"
        setattr(request.state, OUTCOME, "ok" if not result.errors else outcome)
        return data

    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket | None
    ) -> Context:
        user = request.scope.get("user")
        s = self.services
        return Context(
            request=request,
            response=response if isinstance(response, Response) else None,
            service=s.service,
            keys=s.keys,
            feed=s.feed,
            actor=user.actor if isinstance(user, Principal) else None,
            ws_rate_limit=self.key_buckets if isinstance(request, WebSocket) else None,
            schedules_service=s.schedules,
            job_types_service=s.job_types,
        )

    async def on_ws_connect(self, context: Context) -> dict[str, object] | None:
        """The key travels in connection_init: `{"authorization": "Bearer …"}`."""
        params = context.connection_params or {}
        header = params.get("authorization") or params.get("Authorization")
        try:
            token = bearer(header if isinstance(header, str) else None)
            if token is None:
                raise _refuse(NO_KEY, code=ErrorCode.UNAUTHENTICATED)
            key = await self.auth.verify(token, client_address(context.request))
        except InvalidKey as exc:
            raise _refuse(str(exc), code=ErrorCode.UNAUTHENTICATED) from None
        except TooManyFailures as exc:
            raise _refuse(
                str(exc), code=ErrorCode.RATE_LIMITED, retryAfter=exc.retry_after
            ) from None
        context.actor = key.actor()
        keys, secret = self.services.keys, token

        async def verify() -> bool:
            return await keys.verify(secret) is not None

        def on_revoke() -> None:
            context.actor = None  # nothing more runs on this connection

        context.session = Session(
            key.name, verify, self.services.settings.key_recheck_seconds, on_revoke
        )
        self.services.feed.register(context.session)
        return None


class BodyLimit:
    """Refuse request bodies over `max_bytes` with 413 before anything parses them, and hold
    every body in one buffer: the middleware reads it whole, then hands the application one
    message. The bodies being held, server-wide, stay within `budget` bytes (each counts
    its Content-Length, or what has arrived): past it, 503 at once."""

    def __init__(self, app: ASGIApp, max_bytes: int, budget: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.budget = budget
        self.held = 0  # bytes of the bodies in flight, counted before they arrive

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = 0
        for name, value in scope["headers"]:
            if name == b"content-length":
                if not value.isdigit() or int(value) > self.max_bytes:
                    await _too_large(self.max_bytes, scope["path"])(scope, receive, send)
                    return
                declared = int(value)
        reserved = 0
        try:
            if not self._reserve(declared):
                await _busy(scope["path"])(scope, receive, send)
                return
            reserved = declared
            body, size = bytearray(declared), 0  # filled in place as the bytes arrive
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return  # the client left mid-body: nobody to answer
                chunk = message.get("body", b"")
                if size + len(chunk) > self.max_bytes:
                    await _too_large(self.max_bytes, scope["path"])(scope, receive, send)
                    return
                if size + len(chunk) > reserved:  # no Content-Length, or more than it said
                    if not self._reserve(size + len(chunk) - reserved):
                        await _busy(scope["path"])(scope, receive, send)
                        return
                    reserved = size + len(chunk)
                body[size : size + len(chunk)] = chunk
                size += len(chunk)
                if not message.get("more_body", False):
                    break
            del body[size:]
            data = bytes(body)
            del body
            scope.setdefault("state", {})[BODY] = data  # for the operation's label
            whole: Message | None = {"type": "http.request", "body": data}

            async def replay() -> Message:
                nonlocal whole
                if whole is not None:
                    message, whole = whole, None
                    return message
                return await receive()  # e.g. the client leaving a long poll

            await self.app(scope, replay, send)
        finally:
            self.held -= reserved

    def _reserve(self, n: int) -> bool:
        if n and self.held + n > self.budget:
            return False
        self.held += n
        return True


def _busy(path: str) -> Response:
    message = "too many request bodies in flight on this server; retry later"
    headers = {"Retry-After": "1", "Connection": "close"}
    return error_response(None, 503, message, ErrorCode.SERVICE_UNAVAILABLE, headers, path=path)


def _too_large(limit: int, path: str) -> Response:
    message = f"request body over {limit} bytes"
    return error_response(None, 413, message, ErrorCode.PAYLOAD_TOO_LARGE, path=path)


class AllowedOriginsCORS(CORSMiddleware):
    """Starlette's CORS for the origins allowed; a request from any other origin passes by
    untouched, so it gets no CORS header at all (its preflight meets the router's 405)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            origin = Headers(scope=scope).get("origin")
            if origin is not None and not self.is_allowed_origin(origin):
                await self.app(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def _auth_error(conn: HTTPConnection, exc: Exception) -> Response:
    """A refused key, by the rule in this module's docstring."""
    accept, path = conn.headers.get("accept"), conn.url.path
    if isinstance(exc, TooManyFailures):
        what = "too many failed attempts to authenticate from this address"
        return rate_limited(accept, RateLimited(exc.retry_after), what, path)
    message = str(exc)
    challenge = f'Bearer realm="queuelog", error="invalid_token", error_description="{message}"'
    status = 401 if negotiate(accept) == GRAPHQL_RESPONSE or is_rest(path) else 200
    return error_response(
        accept,
        status,
        message,
        ErrorCode.UNAUTHENTICATED,
        {"WWW-Authenticate": challenge},
        path=path,
    )


GC_YOUNG_THRESHOLD = 10_000  # allocations between young collections (CPython: 700)


def _settle_heap() -> None:
    """Exempt everything alive once the server is up (modules, the schema, the pools) from
    the garbage collector, and collect the young generation less often: full collections
    walked that whole heap and were the slowest requests' pauses."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, 10, 10)


def create_app(
    settings: Settings | None = None,
    services: Services | None = None,
    before_serving: Callable[[Services], Awaitable[None]] | None = None,
    settle_heap: bool = False,
) -> Starlette:
    """The application on `services` (opened from `settings` if not given). Its lifespan
    migrates the database, then awaits `before_serving(services)` if given, then seeds the
    schedules and job types and starts the background tasks, all before the first request."""
    settings = settings or Settings()
    s = services or open_services(settings)
    graphql = QueuelogGraphQL(
        s,
        graphql_ide="graphiql" if settings.graphiql else None,
        keep_alive=True,  # legacy graphql-ws "ka"; graphql-transport-ws: WebSocket pings
        keep_alive_interval=settings.ws_ping_interval_seconds,
        connection_init_wait_timeout=timedelta(seconds=settings.ws_init_timeout_seconds),
        max_subscriptions_per_connection=settings.max_subscriptions_per_connection,
        allowed_origins=settings.allowed_origins,
    )
    csp = page_csp(graphql.graphql_ide_html) if graphql.graphql_ide else API_CSP
    if settings.otel:
        from queuelog.edge.tracing import enable

        enable(graphql.schema, [s.db.writer, s.db.reader])
    s.service.observer = Observers(s.service.observer, JobMetrics())
    metrics = MetricsEndpoint(s)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await asyncio.to_thread(migrate, s.db)
        if before_serving is not None:
            await before_serving(s)
        await s.schedules.seed(settings.schedule_configs())
        await s.job_types.seed()
        await s.feed.start()
        tasks = [
            asyncio.create_task(
                maintenance_loop(s.service, settings.maintenance_interval_seconds),
                name="queuelog-maintenance",
            ),
            asyncio.create_task(subscriptions_loop(metrics), name="queuelog-metrics"),
            asyncio.create_task(
                schedule_loop(s.schedules, settings.schedule_interval_seconds),
                name="queuelog-schedules",
            ),
        ]
        if s.db.dialect == "postgresql":  # revocations by other replicas
            url = s.db.url.set(drivername="postgresql").render_as_string(hide_password=False)

            def revoked_elsewhere() -> None:
                s.keys.forget()
                s.feed.recheck_keys()

            heard = listen(url, KEYS_CHANNEL, revoked_elsewhere)
            tasks.append(asyncio.create_task(heard, name="queuelog-key-listen"))
            changed = listen(url, TYPES_CHANNEL, s.job_types.changed)  # pause, limits
            tasks.append(asyncio.create_task(changed, name="queuelog-type-listen"))
        if settle_heap:
            _settle_heap()
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await s.feed.stop()
            s.db.close()
            process_exited(os.getpid())

    # Each route answers its own methods (405 otherwise); every request passes the
    # middlewares below in order, outermost first.
    routes: list[BaseRoute] = [
        Route("/healthz", healthz),
        Route("/readyz", Readiness(s.db, settings).respond),
        Route("/metrics", metrics.respond),
        Route("/graphql", graphql, methods=["GET", "POST"]),
        WebSocketRoute("/graphql", graphql),
        *rest.routes(s),
        openapi.route(),
    ]
    if graphql.graphql_ide:
        routes.append(Mount(ASSETS_PATH, GraphiQLAssets()))
    if settings.dashboard:
        routes += dashboard.routes()
    middleware = [Middleware(EdgeHeaders, page_csp=csp, path_csps={dashboard.PATH: dashboard.CSP})]
    labels = OperationLabels(root_fields(graphql.schema.as_str()), settings.max_tokens)
    observer = Middleware(OperationObserver, labels=labels, body_max=settings.request_max_bytes)
    if settings.allowed_origins:
        middleware.append(
            Middleware(
                AllowedOriginsCORS,
                allow_origins=settings.allowed_origins,
                allow_methods=["GET", "POST"],
                allow_headers=["authorization", "content-type"],
                expose_headers=["retry-after", "www-authenticate", "x-request-id"],
                max_age=600,
            )
        )
    middleware.append(observer)  # after CORS: its preflights are no GraphQL requests
    anonymous = TokenBuckets(
        settings.anonymous_rate_limit_per_second, settings.anonymous_rate_limit_burst
    )
    middleware += [
        Middleware(
            BodyLimit,
            max_bytes=settings.request_max_bytes,
            budget=settings.request_bodies_max_bytes,
        ),
        Middleware(AuthenticationMiddleware, backend=graphql.auth, on_error=_auth_error),
        Middleware(KeyRateLimit, buckets=graphql.key_buckets, anonymous=anonymous),
    ]
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.services = s
    return app
