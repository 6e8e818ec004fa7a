"""The HTTP edge of /graphql: GraphQL-over-HTTP media types and status codes, request ids,
security headers and the per-key rate limit (the view itself is `queuelog.edge.view`).

- `application/graphql-response+json` when the client prefers it: 400 for a request that
  is not well-formed or whose document does not parse or validate (no `data` entry), 200
  once execution ran. `application/json` otherwise (no or a wildcard `Accept`): 200 for every
  well-formed request. 406 when the client accepts neither.
- Every response, whatever produced it, carries `X-Request-Id`, `nosniff`, frame denial and
  a CSP (the GraphiQL page gets one that allows its own origin and inline code by hash;
  pages under a path of `path_csps`, such as the dashboard, get their own).
"""

from __future__ import annotations

import base64
import hashlib
import random
import re
from typing import Any

import orjson
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from queuelog.auth.backend import Principal
from queuelog.auth.ratelimit import RateLimited, TokenBuckets
from queuelog.domain.codes import ErrorCode

GRAPHQL_RESPONSE = "application/graphql-response+json"
JSON = "application/json"
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
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


# The REST routes (`queuelog.edge.rest`): their errors, whoever answers them (a route or a
# middleware), are one JSON object, `{"code": …, "message": …}`, with the GraphQL codes.
REST_PREFIX = "/jobs"


def is_rest(path: str) -> bool:
    return path == REST_PREFIX or path.startswith(REST_PREFIX + "/")


def rest_error(
    status: int, message: str, code: str, headers: dict[str, str] | None = None, **extra: Any
) -> Response:
    """A REST route's error; `extra` named as GraphQL's extensions (`retryAfter` becomes
    `retry_after`, as the REST fields are named)."""
    body = {"code": code, "message": message}
    body.update({re.sub(r"(?<!^)(?=[A-Z])", "_", k).lower(): v for k, v in extra.items()})
    return Response(orjson.dumps(body), status, headers, media_type=JSON)


def error_response(
    accept: str | None,
    status: int,
    message: str,
    code: str,
    headers: dict[str, str] | None = None,
    *,
    path: str = "",
    **extensions: Any,
) -> Response:
    """An error answered before the request reached its route: GraphQL's shape, or the
    REST routes' own for a `path` of theirs."""
    if is_rest(path):
        return rest_error(status, message, code, headers, **extensions)
    body = {"errors": [{"message": message, "extensions": {"code": code, **extensions}}]}
    media = negotiate(accept) or JSON
    return Response(orjson.dumps(body), status, headers, media_type=f"{media}; charset=utf-8")


def rate_limited(
    accept: str | None, exc: RateLimited, what: str = "rate limit exceeded", path: str = ""
) -> Response:
    return error_response(
        accept,
        429,
        f"{what}; retry after {exc.retry_after:.2f} s",
        ErrorCode.RATE_LIMITED,
        {"Retry-After": exc.header},
        path=path,
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


class EdgeHeaders:
    """Give each request an id (`X-Request-Id`, kept from the client when it is sane) and
    every HTTP response the security headers."""

    def __init__(
        self, app: ASGIApp, page_csp: str = API_CSP, path_csps: dict[str, str] | None = None
    ) -> None:
        self.app = app
        self.page_csp = page_csp
        # HTML pages under these path prefixes get their own CSP instead of page_csp.
        self.path_csps = [(prefix, csp.encode()) for prefix, csp in (path_csps or {}).items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        given = _header(scope["headers"], b"x-request-id")
        request_id = given if _REQUEST_ID.fullmatch(given) else f"{_ids.getrandbits(128):032x}"
        scope.setdefault("state", {})["request_id"] = request_id
        page_csp = self.page_csp.encode()
        for prefix, csp in self.path_csps:
            if scope["path"] == prefix or scope["path"].startswith(prefix + "/"):
                page_csp = csp

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
    """A token bucket per API key (after authentication), and one per client address for
    GraphQL and REST requests that carry no key: over it, HTTP 429 RATE_LIMITED before anything
    parses the request."""

    def __init__(
        self, app: ASGIApp, buckets: TokenBuckets, anonymous: TokenBuckets | None = None
    ) -> None:
        self.app = app
        self.buckets = buckets
        self.anonymous = anonymous or TokenBuckets(0, 1)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            user = scope.get("user")
            try:
                if isinstance(user, Principal):
                    self.buckets.take(user.actor.name)
                elif scope["path"] == "/graphql" or is_rest(scope["path"]):
                    client = scope.get("client")
                    self.anonymous.take(client[0] if client else "unknown")
            except RateLimited as exc:
                accept = Headers(scope=scope).get("accept")
                await rate_limited(accept, exc, path=scope["path"])(scope, receive, send)
                return
        await self.app(scope, receive, send)
