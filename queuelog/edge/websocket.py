"""The two WebSocket subprotocols at /graphql: strawberry's handlers for `graphql-transport-ws`
and the legacy `graphql-ws`, held to one set of rules.

The rules are enforced by subclasses of strawberry's protocol handlers, fenced in
`queuelog.fences.strawberry_ws`; `handler_classes` picks them, or, with
QUEUELOG_STRICT_WEBSOCKET off or a strawberry release they were not tested with, leaves
strawberry's own handlers in place. This module holds the rules themselves.

- Every message is checked for its shape before it is dispatched: one that is not an object
  of a known type, with a string `id` and an object `payload` where the type has them,
  closes the socket with 4400 and a reason saying what was wrong.
- `connection_init` is answered once, within the init timeout, on both protocols: a second
  one closes 4429, none in time closes 4408, a refused key closes with the reason (4401 on
  graphql-transport-ws; `connection_error` and 4403 on the legacy protocol).
- Every operation (query, mutation or subscription) first confirms that the connection's key
  is still live, as an HTTP request would, and that its parameters have the right types;
  anything refused before execution answers an `error` message carrying the error.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Mapping
from typing import Any

from graphql import GraphQLError
from strawberry.exceptions import ConnectionRejectionError

from queuelog import fences
from queuelog.api.resolvers.context import Context
from queuelog.auth.permissions import unauthenticated
from queuelog.domain.codes import ErrorCode
from queuelog.events.sessions import KeyRevoked

log = logging.getLogger("queuelog.edge.websocket")

CLOSE_REASON_BYTES = 123  # RFC 6455: a close frame's reason is at most 123 bytes of UTF-8

# For each message type a client may send: whether it carries a string `id`, and whether
# its `payload` must be an object ("required") or may be absent or null ("optional").
TRANSPORT_MESSAGES = {
    "connection_init": (False, "optional"),
    "ping": (False, "optional"),
    "pong": (False, "optional"),
    "subscribe": (True, "required"),
    "complete": (True, None),
}
LEGACY_MESSAGES = {
    "connection_init": (False, "optional"),
    "start": (True, "required"),
    "stop": (True, None),
    "connection_terminate": (False, None),
}


def close_reason(text: str) -> str:
    """`text` cut to fit a close frame."""
    encoded = text.encode()
    if len(encoded) <= CLOSE_REASON_BYTES:
        return text
    return encoded[: CLOSE_REASON_BYTES - 3].decode(errors="ignore") + "..."


def message_problem(message: object, known: Mapping[str, tuple[bool, str | None]]) -> str | None:
    """What is wrong with the shape of a client's message, or None."""
    if not isinstance(message, dict):
        return "a message must be a JSON object"
    kind = message.get("type")
    if not isinstance(kind, str) or kind not in known:
        return f"unknown message type; expected one of: {', '.join(known)}"
    has_id, payload = known[kind]
    if has_id and not (isinstance(message.get("id"), str) and message["id"]):
        return f"a {kind} message needs a non-empty string id"
    value = message.get("payload")
    if payload == "required" and not isinstance(value, dict):
        return f"the payload of a {kind} message must be an object"
    if payload == "optional" and not isinstance(value, dict | None):
        return f"the payload of a {kind} message must be an object"
    if payload == "required" and "query" not in value:  # type: ignore[operator]
        return f"the payload of a {kind} message needs a query"
    return None


def bad_request(message: str) -> GraphQLError:
    return GraphQLError(message, extensions={"code": ErrorCode.BAD_REQUEST})


async def refusal(
    context: Context, query: object, variables: object, operation_name: object
) -> GraphQLError | None:
    """Why an operation must not run on this connection (None: it may)."""
    if not isinstance(query, str):
        return bad_request("the operation's query must be a string")
    if not isinstance(variables, dict | None):
        return bad_request("the operation's variables must be an object")
    if not isinstance(operation_name, str | None):
        return bad_request("the operation's operationName must be a string")
    if context.session is not None:
        try:
            await context.session.confirm()
        except KeyRevoked as exc:
            return unauthenticated(str(exc))
    return None


def server_fault(error: Exception) -> GraphQLError:
    log.error("unexpected error in a WebSocket operation", exc_info=error)
    return GraphQLError(
        "Internal server error", extensions={"code": ErrorCode.INTERNAL_SERVER_ERROR}
    )


def rejection_reason(error: ConnectionRejectionError) -> str:
    payload = error.payload
    message = payload.get("message") if isinstance(payload, dict) else None
    return close_reason(message if isinstance(message, str) else "Forbidden")


def handler_classes(strict: bool) -> tuple[type[Any], type[Any]] | None:
    """The handlers of graphql-transport-ws and graphql-ws that hold to the rules of this
    module, or None: strawberry's own then serve (with one warning when `strict` asked for
    them but the fence cannot be used here)."""
    if not strict:
        return None
    try:
        strawberry_ws = importlib.import_module("queuelog.fences.strawberry_ws")
    except ImportError as exc:  # a strawberry release moved a name the fence imports
        fences.unavailable("QUEUELOG_STRICT_WEBSOCKET", f"{type(exc).__name__}: {exc}", {})
        return None
    if fences.unavailable("QUEUELOG_STRICT_WEBSOCKET", None, strawberry_ws.TESTED) is not None:
        return None
    classes: tuple[type[Any], type[Any]] = strawberry_ws.handler_classes(sys.modules[__name__])
    return classes
