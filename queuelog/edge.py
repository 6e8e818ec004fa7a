"""The HTTP edge of /graphql: GraphQL-over-HTTP media types and status codes, request ids,
security headers, the per-key rate limit, and the execution timeout.

- `application/graphql-response+json` when the client prefers it: 400 for a request that
  is not well-formed or whose document does not parse or validate (no `data` entry), 200
  once execution ran. `application/json` otherwise (no or a wildcard `Accept`): 200 for every
  well-formed request. 406 when the client accepts neither.
- Every response, whatever produced it, carries `X-Request-Id`, `nosniff`, frame denial and
  a CSP (the GraphiQL page gets one that allows its own origin and inline code by hash).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import random
import re
from typing import Any

import orjson
from cross_web import HTTPException
from graphql import GraphQLError
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.http import GraphQLHTTPResponse, GraphQLRequestData
from strawberry.http.parse_content_type import parse_content_type
from strawberry.schema.exceptions import InvalidOperationTypeError
from strawberry.types import ExecutionResult
from strawberry.types.unset import UNSET

from queuelog.auth.backend import Principal
from queuelog.auth.ratelimit import RateLimited, TokenBuckets
from queuelog.resolvers.context import Context

GRAPHQL_RESPONSE = "application/graphql-response+json"
JSON = "application/json"
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
_HTTP_CODES = {405: "METHOD_NOT_ALLOWED", 406: "NOT_ACCEPTABLE", 415: "UNSUPPORTED_MEDIA_TYPE"}
# Request errors (no `data`) whose status is not 400.
_STATUS_BY_CODE = {"EXECUTION_TIMEOUT": 503, "INTERNAL_SERVER_ERROR": 500}
# Request ids only correlate a response with the log, so they need no secrecy: drawn from a
# generator seeded once from the OS. os.urandom on every request released the GIL for its
# syscall, and getting it back waited on whichever thread (the database writer) held it.
_ids = random.Random()

SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
}
API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
_API_CSP_RAW = API_CSP.encode()
_SECURITY_RAW = [(name.encode(), value.encode()) for name, value in SECURITY_HEADERS.items()]
# Set by EdgeHeaders, replacing whatever the application sent.
_REPLACED = frozenset(
    (*(name for name, _ in _SECURITY_RAW), b"content-security-policy", b"x-request-id")
)


def negotiate(accept: str | None) -> str | None:
    """The media type to answer in: the client's highest-priority one we support."""
    if not accept or not accept.strip():
        return JSON
    best: tuple[float, int, str] | None = None
    for i, part in enumerate(accept.split(",")):
        media, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        media = media.lower()
        candidate = (
            GRAPHQL_RESPONSE
            if media == GRAPHQL_RESPONSE
            else JSON
            if media in (JSON, "application/*", "*/*")
            else None
        )
        if candidate and q > 0 and (best is None or (q, -i) > best[:2]):
            best = (q, -i, candidate)
    return best[2] if best else None


def error_response(
    accept: str | None,
    status: int,
    message: str,
    code: str,
    headers: dict[str, str] | None = None,
    **extensions: Any,
) -> Response:
    body = {"errors": [{"message": message, "extensions": {"code": code, **extensions}}]}
    media = negotiate(accept) or JSON
    return Response(orjson.dumps(body), status, headers, media_type=f"{media}; charset=utf-8")


def rate_limited(
    accept: str | None, exc: RateLimited, what: str = "rate limit exceeded"
) -> Response:
    return error_response(
        accept,
        429,
        f"{what}; retry after {exc.retry_after:.2f} s",
        "RATE_LIMITED",
        {"Retry-After": exc.header},
        retryAfter=round(exc.retry_after, 3),
    )


def page_csp(html: str) -> str:
    """A CSP for an HTML page served with all it loads: scripts and styles from this origin
    only, plus the page's own inline scripts and styles by hash."""

    def hashes(tag: str) -> str:
        blocks = re.findall(rf"<{tag}>(.*?)</{tag}>", html, re.DOTALL)
        digests = (base64.b64encode(hashlib.sha256(b.encode()).digest()).decode() for b in blocks)
        return "".join(f" 'sha256-{d}'" for d in digests)

    return (
        f"default-src 'none'; script-src 'self'{hashes('script')}; "
        f"style-src 'self'{hashes('style')}; font-src 'self' data:; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    )


def _plain_json(content_type: str | None) -> bool:
    """`application/json`, UTF-8 if a charset is named: what clients send nearly always."""
    return content_type is not None and content_type.lower().replace(" ", "") in (
        JSON,
        f"{JSON};charset=utf-8",
    )


def _streaming(accept: str | None) -> bool:
    """Whether the client might be asking for a streaming transport (SSE, multipart)."""
    return accept is not None and ("event-stream" in accept or "multipart" in accept)


class EdgeHeaders:
    """Give each request an id (`X-Request-Id`, kept from the client when it is sane) and
    every HTTP response the security headers."""

    def __init__(self, app: ASGIApp, page_csp: str = API_CSP) -> None:
        self.app = app
        self.page_csp = page_csp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        given = _header(scope["headers"], b"x-request-id")
        request_id = given if _REQUEST_ID.fullmatch(given) else f"{_ids.getrandbits(128):032x}"
        scope.setdefault("state", {})["request_id"] = request_id
        page_csp = self.page_csp.encode()

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                # One pass over the raw headers: MutableHeaders rescanned them per header.
                headers, html, cached = [], False, False
                for name, value in message.get("headers", ()):
                    if name in _REPLACED:
                        continue
                    if name == b"content-type":
                        html = value.startswith(b"text/html")
                    cached = cached or name == b"cache-control"
                    headers.append((name, value))
                headers += _SECURITY_RAW
                headers.append((b"content-security-policy", page_csp if html else _API_CSP_RAW))
                if not cached:
                    headers.append((b"cache-control", b"no-store"))
                headers.append((b"x-request-id", request_id.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _header(raw: list[tuple[bytes, bytes]], name: bytes) -> str:
    """The first value of a header (ASGI servers give names lowercased), or ""."""
    for key, value in raw:
        if key == name:
            return value.decode("latin-1")
    return ""


class KeyRateLimit:
    """A token bucket per API key (after authentication): over it, HTTP 429 RATE_LIMITED."""

    def __init__(self, app: ASGIApp, buckets: TokenBuckets) -> None:
        self.app = app
        self.buckets = buckets

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user")
        if scope["type"] == "http" and isinstance(user, Principal):
            try:
                self.buckets.take(user.actor.name)
            except RateLimited as exc:
                accept = Headers(scope=scope).get("accept")
                await rate_limited(accept, exc)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class SpecGraphQL(GraphQL[Context, None]):
    """strawberry's ASGI view, made to follow GraphQL-over-HTTP where it does not already."""

    def __init__(self, *args: Any, execution_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.execution_timeout = execution_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            response = await self.run(request)
        except HTTPException as e:
            response = error_response(
                request.headers.get("accept"),
                e.status_code,
                e.reason,
                _HTTP_CODES.get(e.status_code, "BAD_REQUEST"),
                {"Allow": "POST"} if e.status_code == 405 else None,
            )
        await response(scope, receive, send)  # type: ignore[operator]

    async def run(  # type: ignore[override]
        self, request: Request | WebSocket, context: Any = UNSET, root_value: Any = UNSET
    ) -> Response | WebSocket:
        if isinstance(request, WebSocket):
            return await super().run(request, context, root_value)
        accept = request.headers.get("accept")
        media = negotiate(accept)
        if (
            media
            and request.method == "POST"
            and context is UNSET
            and root_value is UNSET
            and _plain_json(request.headers.get("content-type"))
            and not _streaming(accept)
        ):
            response = await self._post(request, media)
            if response is not None:
                return response
        if media is None and not self.should_render_graphql_ide(
            self.request_adapter_class(request)
        ):
            raise HTTPException(
                406, f"this endpoint answers in {GRAPHQL_RESPONSE} or {JSON}; accept one of them"
            )
        response = await super().run(request, context, root_value)
        if response.headers.get("content-type", "").startswith(JSON) and media:
            status = getattr(request.state, "graphql_status", 200)
            if media == GRAPHQL_RESPONSE or status != 400:
                response.status_code = status
            response.headers["content-type"] = f"{media}; charset=utf-8"
        return response

    async def _post(self, request: Request, media: str) -> Response | None:
        """The common request, a JSON object POSTed, run without strawberry's generic HTTP
        machinery (which cost more than executing a small operation). None for anything
        unusual: the generic path then reads the cached body and answers it as before."""
        data = self.parse_json(await request.body())
        if not isinstance(data, dict):
            return None
        query, variables = data.get("query"), data.get("variables")
        extensions = data.get("extensions")
        if not (
            isinstance(query, str)
            and isinstance(variables, dict | None)
            and isinstance(extensions, dict | None)
        ):
            return None
        request_data = GraphQLRequestData(
            query=query,
            variables=variables,
            operation_name=data.get("operationName"),
            extensions=extensions,
        )
        result = await self.execute_single(
            request=request,
            request_adapter=self.request_adapter_class(request),
            sub_response=None,
            context=await self.get_context(request, response=None),  # type: ignore[arg-type]
            root_value=None,
            request_data=request_data,
        )
        body = await self.process_result(request, result)
        status = getattr(request.state, "graphql_status", 200)
        if media != GRAPHQL_RESPONSE and status == 400:
            status = 200
        return Response(self.encode_json(body), status, media_type=f"{media}; charset=utf-8")

    def encode_json(self, data: object) -> str | bytes:
        # Text, not bytes: strawberry sends bytes over WebSocket as binary frames, which
        # graphql-ws clients (GraphiQL's among them) refuse.
        try:
            return orjson.dumps(data).decode()
        except TypeError:  # e.g. an integer past 64 bits in an error's extensions
            return super().encode_json(data)

    def decode_json(self, data: str | bytes) -> object:
        # orjson: strict UTF-8, and nesting past 1,024 levels is a JSONDecodeError, not a
        # RecursionError.
        return orjson.loads(data)

    def parse_json(self, data: str | bytes) -> Any:
        try:
            return self.decode_json(data)
        except orjson.JSONDecodeError as e:
            raise HTTPException(400, f"the request is not valid UTF-8 JSON: {e}") from e

    async def parse_http_body(self, request: Any) -> Any:
        content_type, params = parse_content_type(request.content_type or "")
        if request.method == "POST":
            if content_type != JSON:
                raise HTTPException(415, f"send the operation as {JSON}")
            if params.get("charset", "utf-8").lower() not in ("utf-8", "utf8"):
                raise HTTPException(415, "the request body must be UTF-8")
        try:
            return await super().parse_http_body(request)
        except AttributeError as e:  # a JSON body that is neither an object nor an array
            raise HTTPException(400, "the request body must be a JSON object") from e
        except HTTPException as e:
            if e.reason == "Batching is not enabled":
                raise HTTPException(
                    400,
                    "batched operations (a JSON array body) are not supported: "
                    "send one operation per request",
                ) from e
            raise

    async def execute_single(self, *args: Any, **kwargs: Any) -> ExecutionResult:
        timeout = asyncio.timeout(self.execution_timeout)
        try:
            async with timeout:
                return await super().execute_single(*args, **kwargs)
        except TimeoutError:
            if not timeout.expired():
                raise
            message = (
                f"execution took longer than {self.execution_timeout:g} s "
                "(QUEUELOG_EXECUTION_TIMEOUT_SECONDS)"
            )
            error = GraphQLError(message, extensions={"code": "EXECUTION_TIMEOUT"})
            return ExecutionResult(data=None, errors=[error])
        except HTTPException as e:
            method = kwargs["request_adapter"].method
            if isinstance(e.__cause__, InvalidOperationTypeError) and method == "GET":
                raise HTTPException(405, f"{e.reason}: use POST") from e
            raise

    async def process_result(
        self, request: Request, result: ExecutionResult
    ) -> GraphQLHTTPResponse:
        data = await super().process_result(request, result)
        errors = result.errors or []
        if result.data is None and errors and all(e.path is None for e in errors):
            # A request error: execution never began, so there is no `data` entry.
            data.pop("data", None)
            codes = [(e.extensions or {}).get("code") for e in errors]
            request.state.graphql_status = next(
                (_STATUS_BY_CODE[c] for c in codes if c in _STATUS_BY_CODE), 400
            )
        return data
