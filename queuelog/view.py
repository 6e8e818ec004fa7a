"""strawberry's ASGI view for /graphql, made to follow GraphQL-over-HTTP where it does not
already (see `queuelog.edge` for the media types and status codes), and, when the fast path
is on, a short path for the request nearly every client sends.

Only strawberry's documented hooks are overridden (`decode_json`, `encode_json`,
`process_result`, with `get_context` and `on_ws_connect` in the app): the request is checked
before strawberry reads it, and its refusals are reworded after, from the outside. The
execution timeout is the schema's (`QueuelogSchema.execute`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
import strawberry
from cross_web import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.http import GraphQLHTTPResponse
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType

from queuelog.edge import GRAPHQL_RESPONSE, JSON, error_response, negotiate
from queuelog.resolvers.context import Context
from queuelog.schema.fastpath.compat import InvalidOperationTypeError
from queuelog.schema.limits import response_too_large
from queuelog.schema.schema import QueuelogSchema

SUBSCRIPTIONS_OVER_WEBSOCKET = (
    "subscriptions are served over WebSocket only: connect to this URL with the "
    "graphql-transport-ws subprotocol"
)
# A run of digits as long as the shortest integer orjson would not read exactly.
_LONG_DIGITS = re.compile(r"\d{19}")
_LONG_DIGIT_BYTES = re.compile(rb"\d{19}")
UNSET: Any = strawberry.UNSET
_HTTP_CODES = {405: "METHOD_NOT_ALLOWED", 406: "NOT_ACCEPTABLE", 415: "UNSUPPORTED_MEDIA_TYPE"}
# Request errors (no `data`) whose status is not 400.
_STATUS_BY_CODE = {"EXECUTION_TIMEOUT": 503, "INTERNAL_SERVER_ERROR": 500}


def _plain_json(content_type: str | None) -> bool:
    """`application/json`, UTF-8 if a charset is named: what clients send nearly always."""
    return content_type is not None and content_type.lower().replace(" ", "") in (
        JSON,
        f"{JSON};charset=utf-8",
    )


def _content_type(header: str) -> tuple[str, dict[str, str]]:
    """The media type of a Content-Type header, lowercased, and its parameters."""
    media, *params = header.split(";")
    pairs = (p.split("=", 1) for p in params if "=" in p)
    return media.strip().lower(), {k.strip().lower(): v.strip().strip('"') for k, v in pairs}


def _streaming(accept: str | None) -> bool:
    """Whether the client might be asking for a streaming transport (SSE, multipart)."""
    return accept is not None and ("event-stream" in accept or "multipart" in accept)


def _too_large(data: object, size: int, ceiling: int) -> dict[str, Any]:
    """What goes out instead of a response (HTTP) or a message's result (WebSocket) whose
    encoding is over the ceiling: the result replaced by a QUERY_TOO_COMPLEX error."""
    result = {"errors": [response_too_large(size, ceiling).formatted]}
    if isinstance(data, dict) and isinstance(data.get("payload"), dict) and "type" in data:
        return {**data, "payload": result}
    return result


class SpecGraphQL(GraphQL[Context, None]):
    """strawberry's ASGI view, made to follow GraphQL-over-HTTP where it does not already."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            try:
                response = await self.run(request)
            except HTTPException as e:
                raise _reworded(e, request.method) from e.__cause__
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
            and isinstance(self.schema, QueuelogSchema)
            and self.schema.prepared is not None
        ):
            response = await self._post(request, media)
            if response is not None:
                return response
        if media is None and not _asks_for_a_page(request):
            raise HTTPException(
                406, f"this endpoint answers in {GRAPHQL_RESPONSE} or {JSON}; accept one of them"
            )
        if request.method == "POST":
            await self._check_post(request)
        response = await super().run(request, context, root_value)
        if response.headers.get("content-type", "").startswith(JSON) and media:
            status = getattr(request.state, "graphql_status", 200)
            if media == GRAPHQL_RESPONSE or status != 400:
                response.status_code = status
            response.headers["content-type"] = f"{media}; charset=utf-8"
        return response

    async def _post(self, request: Request, media: str) -> Response | None:
        """The common request, a JSON object POSTed, answered by a prepared operation when
        the document has one, without strawberry's generic HTTP machinery. None for anything
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
        operation_name = data.get("operationName")
        context = await self.get_context(request, response=None)  # type: ignore[arg-type]
        result = None
        schema = self.schema
        # A request without a key may take the prepared path under the keyed limits: its
        # documents hold no introspection, and every root field they resolve needs a key.
        if (
            isinstance(schema, QueuelogSchema)
            and schema.prepared is not None
            and isinstance(operation_name, str | None)
        ):
            operation = schema.prepared.get(query, operation_name)
            if operation is not None:
                result = await schema.execute_prepared(operation, variables, context)
        if result is None:  # not prepared, or variables the generic path must report
            try:
                result = await self.schema.execute(
                    query,
                    variable_values=variables,
                    context_value=context,
                    operation_name=operation_name,
                    operation_extensions=extensions,
                )
            except InvalidOperationTypeError as e:
                raise HTTPException(400, SUBSCRIPTIONS_OVER_WEBSOCKET) from e
            except Exception:  # a refusal strawberry words itself (no query, no operation)
                return None
        body = await self.process_result(request, result)
        status = getattr(request.state, "graphql_status", 200)
        if media != GRAPHQL_RESPONSE and status == 400:
            status = 200
        return Response(self.encode_json(body), status, media_type=f"{media}; charset=utf-8")

    def encode_json(self, data: object) -> str | bytes:
        # Text, not bytes: strawberry sends bytes over WebSocket as binary frames, which
        # graphql-ws clients (GraphiQL's among them) refuse.
        try:
            encoded: str | bytes = orjson.dumps(data)
        except TypeError:  # e.g. an integer past 64 bits in an error's extensions
            encoded = super().encode_json(data)
        ceiling = self._max_response_bytes()
        if ceiling is not None and len(encoded) > ceiling:
            return orjson.dumps(_too_large(data, len(encoded), ceiling)).decode()
        return encoded.decode() if isinstance(encoded, bytes) else encoded

    def _max_response_bytes(self) -> int | None:
        schema = self.schema
        return schema.limits.max_response_bytes if isinstance(schema, QueuelogSchema) else None

    def decode_json(self, data: str | bytes) -> object:
        # orjson: strict UTF-8, and nesting past 1,024 levels is a JSONDecodeError, not a
        # RecursionError. Every transport (POST, GET's variables, WebSocket) reads here.
        value = orjson.loads(data)
        long_digits = (
            _LONG_DIGITS.search(data) if isinstance(data, str) else _LONG_DIGIT_BYTES.search(data)
        )
        if long_digits:
            # orjson reads an integer beyond 64 bits as a float: such a document is read
            # again, its integers exact, for the service to keep or refuse, never to round.
            try:
                value = json.loads(data)
            except (RecursionError, ValueError):  # too deep for it, or too long a number
                raise orjson.JSONDecodeError("nested too deeply to read", "", 0) from None
        return value

    def parse_json(self, data: str | bytes) -> Any:
        try:
            return self.decode_json(data)
        except orjson.JSONDecodeError as e:
            raise HTTPException(400, f"the request is not valid UTF-8 JSON: {e}") from e

    async def _check_post(self, request: Request) -> None:
        """A POST's body must be one operation as a UTF-8 JSON object: anything else is
        refused here, with a status and a reason of its own, before strawberry reads it."""
        content_type, params = _content_type(request.headers.get("content-type") or "")
        if content_type != JSON:
            raise HTTPException(415, f"send the operation as {JSON}")
        if params.get("charset", "utf-8").lower() not in ("utf-8", "utf8"):
            raise HTTPException(415, "the request body must be UTF-8")
        data = self.parse_json(await request.body())  # Starlette keeps the body for strawberry
        if isinstance(data, list):
            raise HTTPException(
                400,
                "batched operations (a JSON array body) are not supported: "
                "send one operation per request",
            )
        if not isinstance(data, dict):
            raise HTTPException(400, "the request body must be a JSON object")

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


def _asks_for_a_page(request: Request) -> bool:
    """A browser's GET without a query: it is answered with GraphiQL (or 404 without it)."""
    accept = request.headers.get("accept", "")
    return (
        request.method == "GET"
        and "query" not in request.query_params
        and ("text/html" in accept or "*/*" in accept)
    )


def _reworded(error: HTTPException, method: str) -> HTTPException:
    """strawberry's refusal of an operation type, said the way this API says it: a
    subscription is for WebSocket, a mutation over GET is the wrong method."""
    cause = error.__cause__
    if isinstance(cause, InvalidOperationTypeError):
        if cause.operation_type is OperationType.SUBSCRIPTION:
            return HTTPException(400, SUBSCRIPTIONS_OVER_WEBSOCKET)
        if method == "GET":
            return HTTPException(405, f"{error.reason}: use POST")
    return error
