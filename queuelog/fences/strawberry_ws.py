"""The fence around strawberry's WebSocket protocol handlers: subclasses of its
`graphql-transport-ws` and legacy `graphql-ws` handlers (internal modules of strawberry, and
their attributes) that hold both protocols to the rules the edge gives them
(`queuelog.edge.websocket`). Only this module imports them.

`queuelog.edge.websocket.handler_classes` uses them when QUEUELOG_STRICT_WEBSOCKET is on, this
module imports, and the installed strawberry is in `TESTED`; otherwise strawberry's own
handlers serve.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, Protocol

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


class Rules(Protocol):
    """The rules the handlers hold both protocols to: `queuelog.edge.websocket` passes itself,
    so this module imports nothing above the fences."""

    TRANSPORT_MESSAGES: Mapping[str, tuple[bool, str | None]]
    LEGACY_MESSAGES: Mapping[str, tuple[bool, str | None]]

    def bad_request(self, message: str) -> GraphQLError: ...

    def close_reason(self, text: str) -> str: ...

    def message_problem(
        self, message: object, known: Mapping[str, tuple[bool, str | None]]
    ) -> str | None: ...

    async def refusal(
        self, context: Any, query: object, variables: object, operation_name: object
    ) -> Any: ...

    def rejection_reason(self, error: ConnectionRejectionError) -> str: ...

    def server_fault(self, error: Exception) -> GraphQLError: ...


# The request context of an operation: the edge's; the handlers only pass it on.
Context = Any

# The versions the handlers below were tested with, by distribution.
TESTED: Mapping[str, str] = {"strawberry-graphql": ">=0.341.2,<0.342"}


class TransportWSHandler(BaseGraphQLTransportWSHandler[Context, None]):
    """`graphql-transport-ws`, held to `rules`."""

    rules: ClassVar[Rules]

    async def handle_message(self, message: Any) -> None:
        if await _well_formed(self, message, self.rules.TRANSPORT_MESSAGES):
            await super().handle_message(message)

    async def handle_invalid_message(self, error_message: str) -> None:
        await _close_invalid(self, error_message)

    async def handle_connection_init(self, message: Any) -> None:
        if self.connection_timed_out:
            return
        if self.connection_init_timeout_task:
            self.connection_init_timeout_task.cancel()
        await _initialise(self, message, self._reject)

    async def _reject(self, exc: ConnectionRejectionError) -> None:
        # 4401, which graphql-ws clients do not retry (they retry 4403).
        await self.websocket.close(code=4401, reason=self.rules.rejection_reason(exc))

    async def run_operation(self, operation: Operation[Context, None]) -> None:
        try:
            await self._run(operation)
        except WebSocketDisconnected:
            pass
        except GraphQLError as error:  # refused before execution (parsing, limits)
            await operation.send_initial_errors([error])
        except Exception as error:
            await operation.send_initial_errors([self.rules.server_fault(error)])

    async def _run(self, operation: Operation[Context, None]) -> None:
        refused = await self.rules.refusal(
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
    """The legacy `graphql-ws` (subscriptions-transport-ws), held to `rules`:
    it runs queries and mutations as well as subscriptions."""

    rules: ClassVar[Rules]

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
                await _close_invalid(self, "WebSocket message type must be text")
            except NonJsonMessageReceived:
                await _close_invalid(self, "WebSocket message must be valid JSON")
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

    async def handle_message(self, message: Any) -> None:
        if await _well_formed(self, message, self.rules.LEGACY_MESSAGES):
            await super().handle_message(message)

    async def handle_connection_init(self, message: Any) -> None:
        if await _initialise(self, message, self._reject) and self.keep_alive:
            self.keep_alive_task = asyncio.create_task(self.handle_keep_alive())

    async def _reject(self, exc: ConnectionRejectionError) -> None:
        await self.send_message({"type": "connection_error", "payload": exc.payload})
        await self.websocket.close(code=4403, reason=self.rules.rejection_reason(exc))

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
            await self._send_error(operation_id, self.rules.server_fault(error))
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
        refused = await self.rules.refusal(self.context, query, variables, operation_name)
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
                await self._send_error(
                    operation_id, (result.errors or [self.rules.bad_request("?")])[0]
                )
                return
            if not isinstance(result, ExecutionResult):
                error = GraphQLError("incremental delivery (@defer, @stream) is not served")
                await self._send_error(operation_id, error)
                return
            await self.send_data_message(result, operation_id)
            first = False
        await self.send_message({"type": "complete", "id": operation_id})


# -- what both protocols' handlers do alike ----------------------------------------------------

_Handler = TransportWSHandler | LegacyWSHandler


def handler_classes(rules: Rules) -> tuple[type[TransportWSHandler], type[LegacyWSHandler]]:
    """Both handlers, held to `rules`."""
    transport = type("TransportWSHandler", (TransportWSHandler,), {"rules": rules})
    legacy = type("LegacyWSHandler", (LegacyWSHandler,), {"rules": rules})
    return transport, legacy


async def _close_invalid(handler: _Handler, problem: str) -> None:
    await handler.websocket.close(code=4400, reason=handler.rules.close_reason(problem))


async def _well_formed(
    handler: _Handler, message: Any, known: Mapping[str, tuple[bool, str | None]]
) -> bool:
    """Whether `message` has the shape of one of the protocol's `known` messages; if not,
    the connection is closed (4400) naming what is wrong."""
    problem = handler.rules.message_problem(message, known)
    if problem is not None:
        await _close_invalid(handler, problem)
    return problem is None


async def _initialise(
    handler: _Handler,
    message: Any,
    reject: Callable[[ConnectionRejectionError], Awaitable[None]],
) -> bool:
    """A connection_init, as both protocols take it: a second one closes the connection
    (4429); the first's payload becomes the connection params, then `on_ws_connect` either
    accepts them (acknowledged: True) or rejects them (`reject`, the protocol's way: False)."""
    if handler.connection_init_received:
        await handler.websocket.close(code=4429, reason="Too many initialisation requests")
        return False
    handler.connection_init_received = True
    handler.context.connection_params = message.get("payload") or {}
    try:
        ack = await handler.view.on_ws_connect(handler.context)
    except ConnectionRejectionError as exc:
        await reject(exc)
        return False
    if isinstance(ack, dict):
        await handler.send_message({"type": "connection_ack", "payload": ack})
    else:
        await handler.send_message({"type": "connection_ack"})
    handler.connection_acknowledged = True
    return True
