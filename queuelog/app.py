"""The Starlette application: GraphQL over HTTP and WebSocket at /graphql, GraphiQL, health,
the request-body limit, authentication, and the background tasks of the lifespan."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.exceptions import ConnectionRejectionError

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
from queuelog.edge import API_CSP, EdgeHeaders, KeyRateLimit, page_csp, rate_limited
from queuelog.events.listen import listen
from queuelog.events.sessions import Session
from queuelog.graphiql import ASSETS_PATH, GraphiQLAssets, offline_page
from queuelog.resolvers.context import Context
from queuelog.schema.schema import build_schema
from queuelog.service.maintenance import maintenance_loop
from queuelog.services import Services, open_services
from queuelog.storage.db import KEYS_CHANNEL
from queuelog.storage.migrate import migrate
from queuelog.view import SpecGraphQL


class QueuelogGraphQL(SpecGraphQL):
    def __init__(self, services: Services, **kwargs: Any) -> None:
        super().__init__(build_schema(services.settings), **kwargs)
        self.services = services
        st = services.settings
        failures = TokenBuckets(st.auth_failures_per_minute / 60, st.auth_failure_burst)
        self.auth = ApiKeyBackend(services.keys, failures)
        self.key_buckets = TokenBuckets(st.rate_limit_per_second, st.rate_limit_burst)
        self.ide_page = offline_page(super().graphql_ide_html) if self.graphql_ide else ""

    @property
    def graphql_ide_html(self) -> str:
        return self.ide_page

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
        )

    async def on_ws_connect(self, context: Context) -> dict[str, object] | None:
        """The key travels in connection_init: `{"authorization": "Bearer …"}`."""
        params = context.connection_params or {}
        header = params.get("authorization") or params.get("Authorization")
        try:
            token = bearer(header if isinstance(header, str) else None)
        except InvalidKey as exc:
            raise ConnectionRejectionError({"message": str(exc)}) from None
        try:
            address = client_address(context.request)
            key = None if token is None else await self.auth.verify(token, address)
        except TooManyFailures as exc:
            reject = {"message": str(exc), "code": "RATE_LIMITED", "retryAfter": exc.retry_after}
            raise ConnectionRejectionError(reject) from None
        if key is None or token is None:
            raise ConnectionRejectionError({"message": "a live API key is required"})
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
    """Refuse request bodies over `max_bytes` with 413 before anything parses them."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and (not value.isdigit() or int(value) > self.max_bytes):
                await _too_large(self.max_bytes)(scope, receive, send)
                return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _BodyTooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except _BodyTooLarge:
            await _too_large(self.max_bytes)(scope, receive, send)


class GraphQLFirst:
    """POST /graphql straight to the GraphQL view, past Starlette's exception middleware and
    router: the view answers its own errors, and the hops cost on every request."""

    def __init__(self, app: ASGIApp, graphql: ASGIApp) -> None:
        self.app = app
        self.graphql = graphql

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"] == "/graphql"
            and not scope.get("root_path")
        ):
            await self.graphql(scope, receive, send)
        else:
            await self.app(scope, receive, send)


class _BodyTooLarge(Exception):
    pass


def _too_large(limit: int) -> Response:
    return JSONResponse(
        {
            "errors": [
                {
                    "message": f"request body over {limit} bytes",
                    "extensions": {"code": "PAYLOAD_TOO_LARGE"},
                }
            ]
        },
        status_code=413,
    )


def _auth_error(conn: HTTPConnection, exc: Exception) -> Response:
    if isinstance(exc, TooManyFailures):
        limited = RateLimited(exc.retry_after)
        return rate_limited(conn.headers.get("accept"), limited, "too many failed attempts")
    return JSONResponse(
        {"errors": [{"message": str(exc), "extensions": {"code": "UNAUTHENTICATED"}}]},
        status_code=401,
        headers={"WWW-Authenticate": 'Bearer realm="queuelog"'},
    )


async def _health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


def create_app(settings: Settings | None = None, services: Services | None = None) -> Starlette:
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
        execution_timeout=settings.execution_timeout_seconds,
    )
    csp = page_csp(graphql.graphql_ide_html) if graphql.graphql_ide else API_CSP

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await asyncio.to_thread(migrate, s.db)
        await s.feed.start()
        tasks = [
            asyncio.create_task(
                maintenance_loop(s.service, settings.maintenance_interval_seconds),
                name="queuelog-maintenance",
            )
        ]
        if s.db.dialect == "postgresql":  # revocations by other replicas
            url = s.db.url.set(drivername="postgresql").render_as_string(hide_password=False)
            forget = listen(url, KEYS_CHANNEL, s.keys.forget)
            tasks.append(asyncio.create_task(forget, name="queuelog-key-listen"))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await s.feed.stop()
            s.db.close()

    routes: list[BaseRoute] = [
        Route("/healthz", _health),
        Route("/graphql", graphql, methods=["GET", "POST"]),
        WebSocketRoute("/graphql", graphql),
    ]
    if graphql.graphql_ide:
        routes.append(Mount(ASSETS_PATH, GraphiQLAssets()))
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(EdgeHeaders, page_csp=csp),
            Middleware(BodyLimit, max_bytes=settings.request_max_bytes),
            Middleware(AuthenticationMiddleware, backend=graphql.auth, on_error=_auth_error),
            Middleware(KeyRateLimit, buckets=graphql.key_buckets),
            Middleware(GraphQLFirst, graphql=graphql),
        ],
        lifespan=lifespan,
    )
    app.state.services = s
    return app
