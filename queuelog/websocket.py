"""The two WebSocket subprotocols at /graphql: strawberry's handlers for `graphql-transport-ws`
and the legacy `graphql-ws`, held to one set of rules.

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

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from graphql import GraphQLError
from strawberry.exceptions import ConnectionRejectionError
from strawberry.http.exceptions import (
    NonJsonMessageReceived,
    NonTextMessageReceived,
    WebSocketDisconnected,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
    Operation,
)
from strawberry.subscriptions.protocols.graphql_ws.handlers import BaseGraphQLWSHandler
from strawberry.types.execution import ExecutionResult, PreExecutionError

from queuelog.auth.permissions import unauthenticated
from queuelog.events.sessions import KeyRevoked
from queuelog.resolvers.context import Context

log = logging.getLogger("queuelog.websocket")

CLOSE_REASON_BYTES = 123  # RFC 6455: a close frame's reason is at most 123 bytes of UTF-8

# For each message type a client may send: whether it carries a string `id`, and whether
# its `payload` must be an object ("required") or may be absent or null ("optional").
_TRANSPORT_MESSAGES = {
    "connection_init": (False, "optional"),
    "ping": (False, "optional"),
    "pong": (False, "optional"),
    "subscribe": (True, "required"),
    "complete": (True, None),
}
_LEGACY_MESSAGES = {
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


def _bad_request(message: str) -> GraphQLError:
    return GraphQLError(message, extensions={"code": "BAD_REQUEST"})


async def refusal(
    context: Context, query: object, variables: object, operation_name: object
) -> GraphQLError | None:
    """Why an operation must not run on this connection (None: it may)."""
    if not isinstance(query, str):
        return _bad_request("the operation's query must be a string")
    if not isinstance(variables, dict | None):
        return _bad_request("the operation's variables must be an object")
    if not isinstance(operation_name, str | None):
        return _bad_request("the operation's operationName must be a string")
    if context.session is not None:
        try:
            await context.session.confirm()
        except KeyRevoked as exc:
            return unauthenticated(str(exc))
    return None


def _server_fault(error: Exception) -> GraphQLError:
    log.error("unexpected error in a WebSocket operation", exc_info=error)
    return GraphQLError("Internal server error", extensions={"code": "INTERNAL_SERVER_ERROR"})


def _rejection_reason(error: ConnectionRejectionError) -> str:
    payload = error.payload
    message = payload.get("message") if isinstance(payload, dict) else None
    return close_reason(message if isinstance(message, str) else "Forbidden")


class TransportWSHandler(BaseGraphQLTransportWSHandler[Context, None]):
    """`graphql-transport-ws`, with the rules of this module."""

    async def handle_message(self, message: Any) -> None:
        problem = message_problem(message, _TRANSPORT_MESSAGES)
        if problem is not None:
            await self.handle_invalid_message(problem)
            return
        await super().handle_message(message)

    async def handle_invalid_message(self, error_message: str) -> None:
        await self.websocket.close(code=4400, reason=close_reason(error_message))

    async def handle_connection_init(self, message: Any) -> None:
        if self.connection_timed_out:
            return
        if self.connection_init_timeout_task:
            self.connection_init_timeout_task.cancel()
        if self.connection_init_received:
            await self.websocket.close(code=4429, reason="Too many initialisation requests")
            return
        self.connection_init_received = True
        self.context.connection_params = message.get("payload") or {}
        try:
            ack = await self.view.on_ws_connect(self.context)
        except ConnectionRejectionError as exc:
            # 4401, which graphql-ws clients do not retry (they retry 4403).
            await self.websocket.close(code=4401, reason=_rejection_reason(exc))
            return
        if isinstance(ack, dict):
            await self.send_message({"type": "connection_ack", "payload": ack})
        else:
            await self.send_message({"type": "connection_ack"})
        self.connection_acknowledged = True

    async def run_operation(self, operation: Operation[Context, None]) -> None:
        try:
            await self._run(operation)
        except WebSocketDisconnected:
            pass
        except GraphQLError as error:  # refused before execution (parsing, limits)
            await operation.send_initial_errors([error])
        except Exception as error:
            await operation.send_initial_errors([_server_fault(error)])

    async def _run(self, operation: Operation[Context, None]) -> None:
        refused = await refusal(
            self.context, operation.query, operation.variables, operation.operation_name
        )
        if refused is not None:
            await operation.send_initial_errors([refused])
            return
        results = await self.schema.stream(
            operation.query,
            variable_values=operation.variables,
            context_value=self.context,
            root_value=self.root_value,
            operation_name=operation.operation_name,
        )
        async with contextlib.aclosing(results):
            first = True
            async for result in results:
                if first and isinstance(result, PreExecutionError):
                    await operation.send_initial_errors(result.errors or [])
                    return
                if not isinstance(result, ExecutionResult):
                    error = GraphQLError("incremental delivery (@defer, @stream) is not served")
                    await operation.send_initial_errors([error])
                    return
                await operation.send_next(result)
                first = False
        await operation.send_operation_message({"id": operation.id, "type": "complete"})


class LegacyWSHandler(BaseGraphQLWSHandler[Context, None]):
    """The legacy `graphql-ws` (subscriptions-transport-ws), with the rules of this module:
    it runs queries and mutations as well as subscriptions."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connection_init_received = False

    async def handle(self) -> None:
        deadline = asyncio.create_task(self._close_unless_initialised())
        try:
            try:
                async for message in self.websocket.iter_json():
                    await self.handle_message(message)
            except NonTextMessageReceived:
                await self._close_invalid("WebSocket message type must be text")
            except NonJsonMessageReceived:
                await self._close_invalid("WebSocket message must be valid JSON")
        except WebSocketDisconnected:
            pass
        finally:
            for task in (deadline, self.keep_alive_task):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
            await self.cleanup()

    async def _close_unless_initialised(self) -> None:
        await asyncio.sleep(self.view.connection_init_wait_timeout.total_seconds())
        if not self.connection_init_received:
            with contextlib.suppress(Exception):
                await self.websocket.close(code=4408, reason="Connection initialisation timeout")

    async def _close_invalid(self, reason: str) -> None:
        await self.websocket.close(code=4400, reason=close_reason(reason))

    async def handle_message(self, message: Any) -> None:
        problem = message_problem(message, _LEGACY_MESSAGES)
        if problem is not None:
            await self._close_invalid(problem)
            return
        await super().handle_message(message)

    async def handle_connection_init(self, message: Any) -> None:
        if self.connection_init_received:
            await self.websocket.close(code=4429, reason="Too many initialisation requests")
            return
        self.connection_init_received = True
        self.context.connection_params = message.get("payload") or {}
        try:
            ack = await self.view.on_ws_connect(self.context)
        except ConnectionRejectionError as exc:
            await self.send_message({"type": "connection_error", "payload": exc.payload})
            await self.websocket.close(code=4403, reason=_rejection_reason(exc))
            return
        if isinstance(ack, dict):
            await self.send_message({"type": "connection_ack", "payload": ack})
        else:
            await self.send_message({"type": "connection_ack"})
        self.connection_acknowledged = True
        if self.keep_alive:
            self.keep_alive_task = asyncio.create_task(self.handle_keep_alive())

    async def handle_async_results(
        self,
        operation_id: str,
        query: str,
        operation_name: str | None,
        variables: dict[str, object] | None,
    ) -> None:
        try:
            await self._run(operation_id, query, operation_name, variables)
        except asyncio.CancelledError:  # stopped by the client, or the connection closed
            with contextlib.suppress(Exception):
                await self.send_message({"type": "complete", "id": operation_id})
        except WebSocketDisconnected:
            pass
        except GraphQLError as error:  # refused before execution (parsing, limits)
            await self._send_error(operation_id, error)
        except Exception as error:
            await self._send_error(operation_id, _server_fault(error))
        finally:
            self.subscriptions.pop(operation_id, None)
            self.tasks.pop(operation_id, None)

    async def _send_error(self, operation_id: str, error: GraphQLError) -> None:
        with contextlib.suppress(WebSocketDisconnected):
            message = {"type": "error", "id": operation_id, "payload": error.formatted}
            await self.send_message(message)  # type: ignore[arg-type]

    async def _run(
        self, operation_id: str, query: object, operation_name: object, variables: object
    ) -> None:
        refused = await refusal(self.context, query, variables, operation_name)
        if refused is not None:
            await self._send_error(operation_id, refused)
            return
        results = await self.schema.stream(
            query,  # type: ignore[arg-type]
            variable_values=variables,  # type: ignore[arg-type]
            context_value=self.context,
            root_value=self.root_value,
            operation_name=operation_name,  # type: ignore[arg-type]
        )
        self.subscriptions[operation_id] = results
        first = True
        async for result in results:
            if first and isinstance(result, PreExecutionError):
                await self._send_error(operation_id, (result.errors or [_bad_request("?")])[0])
                return
            if not isinstance(result, ExecutionResult):
                error = GraphQLError("incremental delivery (@defer, @stream) is not served")
                await self._send_error(operation_id, error)
                return
            await self.send_data_message(result, operation_id)
            first = False
        await self.send_message({"type": "complete", "id": operation_id})
