"""What is logged of a GraphQL error, and what the client is shown of one.

A client's mistake (a refused key or role, an invalid document or variables, a limit) is
logged as one line: its code, where, and the request id, never its message, which can
quote a variable's value (a job's payload) or a literal of the document. A fault of the
server is logged with its traceback and shown to the client as INTERNAL_SERVER_ERROR with
the request id; a transaction the database ended for a conflict on every try is logged as
one line and shown as TRY_AGAIN (retryable: nothing took effect).
"""

from __future__ import annotations

import logging

from graphql import GraphQLError, GraphQLSyntaxError

from queuelog.domain.codes import ErrorCode
from queuelog.storage.deadline import DeadlinePassed
from queuelog.storage.retry import Contended

log = logging.getLogger("queuelog.errors")


def request_id(context: object) -> str | None:
    request = getattr(context, "request", None)
    scope = getattr(request, "scope", None)
    if not isinstance(scope, dict):
        return None
    found = scope.get("state", {}).get("request_id")
    return None if found is None else str(found)


def is_fault(error: GraphQLError) -> bool:
    """A fault of the server: an exception that is not one of ours (GraphQLErrors carry
    their own code; a read stopped at the request's deadline is the request's timeout)."""
    original = error.original_error
    return original is not None and not isinstance(original, (GraphQLError, DeadlinePassed))


def client_code(error: GraphQLError) -> str:
    """The error's code; one without a code is a parse error or a bad input (variables
    that do not coerce, an unknown operation name): validation codes its own."""
    code = (error.extensions or {}).get("code")
    if isinstance(code, str):
        return code
    if isinstance(error, GraphQLSyntaxError):
        return ErrorCode.GRAPHQL_PARSE_FAILED
    return ErrorCode.BAD_USER_INPUT


def log_errors(errors: list[GraphQLError], context: object) -> None:
    """One line for each client error; faults are logged where they are masked."""
    for error in errors:
        if not is_fault(error):
            log.info(
                "client error %s at %s (request %s)",
                client_code(error),
                ".".join(map(str, error.path)) if error.path else "the request",
                request_id(context),
            )


def mask(errors: list[GraphQLError], context: object) -> list[GraphQLError]:
    """Every fault replaced by INTERNAL_SERVER_ERROR and the request id, for the client;
    the log gets its traceback."""
    return [_masked(e, context) if is_fault(e) else e for e in errors]


def _masked(error: GraphQLError, context: object) -> GraphQLError:
    rid = request_id(context)
    if isinstance(error.original_error, Contended):
        # Not a fault: the database ended the transaction for a conflict on every try
        # (`storage.retry`); nothing took effect, and the client may send it again.
        log.warning("request %s at %s: %s", rid, error.path, error.original_error)
        return GraphQLError(
            str(error.original_error),
            nodes=error.nodes,
            source=error.source,
            positions=error.positions,
            path=error.path,
            extensions={"code": Contended.code, "retryable": True, "requestId": rid},
        )
    log.error("unexpected error (request %s) at %s", rid, error.path, exc_info=error.original_error)
    return GraphQLError(
        "Internal server error",
        nodes=error.nodes,
        source=error.source,
        positions=error.positions,
        path=error.path,
        extensions={"code": ErrorCode.INTERNAL_SERVER_ERROR, "requestId": rid},
    )
