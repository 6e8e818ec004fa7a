"""Every request seen from outside the GraphQL view: its details for the log
(`queuelog.edge.logs.CURRENT`) and, for GraphQL over HTTP, its operation, outcome and time for
the metrics.

An operation is labelled by its root field (`enqueueJob`, `jobs`, …), a name the schema
fixes, so the metrics' labels stay few whatever clients send: `multiple` when it selects
several, `invalid` when it names none the schema has or does not parse. The outcome is
`ok`, `error` (it ran, with errors) or `rejected` (refused before it ran: a bad document, a
refused key, a limit), as the view records it, or from the status when the view never saw
the request."""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from urllib.parse import parse_qs

import graphql
import orjson
from graphql import FieldNode, GraphQLError, OperationDefinitionNode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from queuelog.edge.logs import CURRENT, RequestInfo
from queuelog.edge.metrics import observe_request

OUTCOME = "graphql_outcome"  # the view's verdict, in the request's state
BODY = "queuelog_body"  # the request's whole body, in its state (`app.BodyLimit` reads it)
INVALID = "invalid"
MULTIPLE = "multiple"
INTROSPECTION = frozenset({"__schema", "__type"})


def root_fields(sdl: str) -> dict[str, frozenset[str]]:
    """The root fields of each operation type of the schema printed as `sdl`."""
    schema = graphql.build_schema(sdl)
    roots = {
        "query": schema.query_type,
        "mutation": schema.mutation_type,
        "subscription": schema.subscription_type,
    }
    return {op: frozenset(t.fields) for op, t in roots.items() if t is not None}


class OperationLabels:
    """The label of an operation, each document parsed once (an LRU of recent ones)."""

    def __init__(self, fields: Mapping[str, frozenset[str]], max_tokens: int) -> None:
        self.fields = fields
        self.max_tokens = max_tokens
        self.of_document = functools.lru_cache(maxsize=1024)(self._of_document)

    def _of_document(self, query: str, operation_name: str | None) -> str:
        try:
            document = graphql.parse(query, no_location=True, max_tokens=self.max_tokens)
        except (GraphQLError, RecursionError):
            return INVALID
        operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
        if operation_name is None:
            chosen = operations[0] if len(operations) == 1 else None
        else:
            named = (o for o in operations if o.name and o.name.value == operation_name)
            chosen = next(named, None)
        if chosen is None:
            return INVALID
        selections = chosen.selection_set.selections
        if not all(isinstance(s, FieldNode) for s in selections):
            return MULTIPLE  # fragments at the root
        names = {s.name.value for s in selections if isinstance(s, FieldNode)}
        names.discard("__typename")
        if len(names) > 1:
            return MULTIPLE
        if not names:
            return "__typename"
        (name,) = names
        known = self.fields.get(chosen.operation.value, frozenset())
        return name if name in known or name in INTROSPECTION else INVALID

    def of_request(self, method: str, query_string: bytes, body: bytes) -> str | None:
        """The label of a request's operation; None for a GET that asks for none (the
        GraphiQL page)."""
        if method == "GET":
            params = parse_qs(query_string.decode("latin-1"))
            if "query" not in params:
                return None
            name = params.get("operationName", [None])[0]
            return self.of_document(params["query"][0], name or None)
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            return INVALID
        if not isinstance(data, dict) or not isinstance(data.get("query"), str):
            return INVALID
        name = data.get("operationName")
        return self.of_document(data["query"], name if isinstance(name, str) else None)


class OperationObserver:
    """ASGI middleware (after the request id is set): sets the request's log details, and
    counts and times each GraphQL request over HTTP at `path`."""

    def __init__(
        self, app: ASGIApp, labels: OperationLabels, body_max: int, path: str = "/graphql"
    ) -> None:
        self.app = app
        self.labels = labels
        self.body_max = body_max
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        info = RequestInfo(scope)
        token = CURRENT.set(info)
        try:
            if scope["type"] == "http" and scope["path"] == self.path:
                await self._observed(scope, receive, send, info)
            else:
                await self.app(scope, receive, send)
        finally:
            CURRENT.reset(token)

    async def _observed(
        self, scope: Scope, receive: Receive, send: Send, info: RequestInfo
    ) -> None:
        status = 500
        label: list[str | None] = []  # once the response has begun, the body is all read

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                label.append(operation())
            await send(message)

        def operation() -> str | None:
            if label:
                return label[0]
            body = scope.get("state", {}).get(BODY, b"")  # no copy of its own
            return self.labels.of_request(scope["method"], scope["query_string"], body)

        info.operation = operation
        start = time.perf_counter()
        try:
            await self.app(scope, receive, send_status)
        finally:
            name = operation()
            if name is not None:
                outcome = scope.get("state", {}).get(OUTCOME)
                if outcome is None:
                    outcome = "rejected" if status < 500 else "error"
                observe_request(name, outcome, time.perf_counter() - start)
