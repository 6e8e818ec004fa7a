"""Every error code queuelog answers with, in one catalogue.

`UserErrorCode` is the code of a mutation's `userErrors` (the contract's enum of that name is
generated from it, descriptions included); `ErrorCode` is the `extensions.code` of a GraphQL
error, which the HTTP and WebSocket edge, the client and the worker all read. Both are `str`
enums, so a code compares equal to its spelling on the wire."""

from __future__ import annotations

import enum


class UserErrorCode(enum.StrEnum):
    """Why a mutation refused its input (a `userErrors` entry); nothing was changed."""

    VALIDATION_FAILED = "VALIDATION_FAILED"
    JOB_TYPE_NOT_ALLOWED = "JOB_TYPE_NOT_ALLOWED"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    PRIORITY_NOT_ALLOWED = "PRIORITY_NOT_ALLOWED"
    IDEMPOTENCY_KEY_REUSED = "IDEMPOTENCY_KEY_REUSED"
    NOT_FOUND = "NOT_FOUND"
    INVALID_STATE = "INVALID_STATE"
    NOT_JOB_OWNER = "NOT_JOB_OWNER"
    NAME_TAKEN = "NAME_TAKEN"
    INVALID_SCHEDULE = "INVALID_SCHEDULE"


# Descriptions the GraphQL enum carries for some values (the contract's own words).
USER_ERROR_DESCRIPTIONS: dict[UserErrorCode, str] = {
    UserErrorCode.INVALID_SCHEDULE: "The cron expression or time zone does not parse.",
}


class ErrorCode(enum.StrEnum):
    """`extensions.code` of a GraphQL error: the request, or one field of it, failed."""

    UNAUTHENTICATED = "UNAUTHENTICATED"  # no key, or a key that is unknown or revoked
    FORBIDDEN = "FORBIDDEN"  # the key's role may not use this field
    RATE_LIMITED = "RATE_LIMITED"  # with `retryAfter` seconds
    BAD_REQUEST = "BAD_REQUEST"  # the request or message is not well-formed
    BAD_USER_INPUT = "BAD_USER_INPUT"  # variables or arguments that do not fit
    GRAPHQL_PARSE_FAILED = "GRAPHQL_PARSE_FAILED"
    GRAPHQL_VALIDATION_FAILED = "GRAPHQL_VALIDATION_FAILED"
    QUERY_TOO_COMPLEX = "QUERY_TOO_COMPLEX"  # past a query limit (depth, aliases, cost, …)
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"  # a request body over the limit
    NOT_FOUND = "NOT_FOUND"
    CURSOR_EXPIRED = "CURSOR_EXPIRED"  # a subscription's `after` is older than the feed keeps
    EXECUTION_TIMEOUT = "EXECUTION_TIMEOUT"  # the request ran past its time; retry later
    TRY_AGAIN = "TRY_AGAIN"  # a transaction given up on after conflicts; nothing took effect
    INTERNAL_SERVER_ERROR = "INTERNAL_SERVER_ERROR"  # masked; with `requestId` for the logs
    SERVICE_UNAVAILABLE = "SERVICE_UNAVAILABLE"  # the server is at a bound of its own; retry
    # GraphQL over HTTP: the method, the Accept header or the Content-Type is not served
    METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
    NOT_ACCEPTABLE = "NOT_ACCEPTABLE"
    UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"


class ClientCode(enum.StrEnum):
    """Codes the Python client gives failures that never reached a GraphQL answer."""

    CONNECTION_FAILED = "CONNECTION_FAILED"
    GRAPHQL_ERROR = "GRAPHQL_ERROR"  # an error without a code
    BAD_RESPONSE = "BAD_RESPONSE"  # an answer that is not a GraphQL response
    PROTOCOL_ERROR = "PROTOCOL_ERROR"  # a WebSocket message out of the protocol's order


def http_code(status: int) -> str:
    """The client's code for an HTTP status answered without a GraphQL body."""
    return f"HTTP_{status}"


# Failures a worker retries: the server was unreachable, restarting, busy, or failed this
# request (a fault, a transaction it gave up on, a timeout); any HTTP 5xx too (`transient`).
TRANSIENT: frozenset[str] = frozenset(
    {
        ClientCode.CONNECTION_FAILED,
        ClientCode.BAD_RESPONSE,
        ErrorCode.RATE_LIMITED,
        ErrorCode.INTERNAL_SERVER_ERROR,
        ErrorCode.TRY_AGAIN,
        ErrorCode.EXECUTION_TIMEOUT,
    }
)


def transient(code: str) -> bool:
    """Whether a failure with `code` is worth retrying as it is."""
    return code in TRANSIENT or code.startswith("HTTP_5")
