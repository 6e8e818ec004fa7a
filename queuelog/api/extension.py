"""The one schema extension every operation runs through: cached parsing under the token
limit, cached validation under the prebuilt rules, error codes for what is refused before
execution, and masking of the server's faults (`queuelog.api.errors`)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from graphql import (
    DocumentNode,
    GraphQLError,
    GraphQLSchema,
    GraphQLSyntaxError,
    IntValueNode,
    OperationDefinitionNode,
    Visitor,
    parse,
    visit,
)
from strawberry.extensions import ParserCache, SchemaExtension, ValidationCache
from strawberry.types import StreamExecutionResult

from queuelog.api.errors import client_code, mask
from queuelog.api.limits import TOO_COMPLEX, QueryLimits, too_complex
from queuelog.domain.codes import ErrorCode
from queuelog.fences.graphql_core import graphql_schema

_NOTHING_TO_RUN = parse("{ __typename }")
_SUGGESTION = re.compile(r"\s*Did you mean .*$", re.DOTALL)
# Longer than any integer the API takes (the service keeps 64 bits): a longer literal is
# refused before a scalar converts it (Python would refuse past 4,300 digits, in its words).
INT_LITERAL_DIGITS = 100
_LONG_DIGITS = re.compile(rf"\d{{{INT_LITERAL_DIGITS + 1}}}")
# strawberry keeps both LRU caches at module level, keyed by size: every request shares them.
_parse = ParserCache(maxsize=1024).cached_parse_document
_validate = ValidationCache(maxsize=1024).cached_validate_document


def parse_document(query: str, max_tokens: int) -> DocumentNode:
    """Parse (cached), refusing documents over the token limit or nested too deeply."""
    try:
        document: DocumentNode = _parse(query, max_tokens=max_tokens)
    except GraphQLSyntaxError as exc:
        if "tokens" in exc.message and "Parsing aborted" in exc.message:
            raise too_complex(
                "maxTokens", "QUEUELOG_MAX_TOKENS", max_tokens + 1, max_tokens, "token count"
            ) from None
        exc.extensions = {"code": ErrorCode.GRAPHQL_PARSE_FAILED}
        raise
    except RecursionError:
        raise GraphQLError(
            "the document is nested too deeply to parse",
            extensions={"code": TOO_COMPLEX, "limit": "nesting"},
        ) from None
    if _LONG_DIGITS.search(query):  # maybe only in a string or a comment: look closer
        visit(document, _LongIntegers())
    return document


class _LongIntegers(Visitor):
    """Refuses an integer literal longer than INT_LITERAL_DIGITS, without quoting it."""

    def enter_int_value(self, node: IntValueNode, *_args: object) -> None:
        digits = len(node.value.lstrip("-"))
        if digits > INT_LITERAL_DIGITS:
            raise GraphQLError(
                f"an integer literal of {digits} digits is longer than any value this API "
                f"takes (at most {INT_LITERAL_DIGITS} digits)",
                node,
                extensions={"code": ErrorCode.GRAPHQL_VALIDATION_FAILED},
            )


def validate_document(
    schema: GraphQLSchema, document: DocumentNode, limits: QueryLimits, authenticated: bool = True
) -> list[GraphQLError]:
    """Validate (cached) under the schema's rules and limits (the lower cost ceiling for a
    request without a key), each error coded. Validation errors are the client's: any
    exception a rule met on the way is the cause of none of them, so none is masked. A rule
    that raises is a fault of ours, reported as one error that `mask` turns into
    INTERNAL_SERVER_ERROR."""
    try:
        errors: list[GraphQLError] = _validate(schema, document, limits.rules_for(authenticated))
    except Exception as exc:  # any fault of a rule, answered as one error
        return [GraphQLError("a validation rule failed", original_error=exc)]
    for error in errors:
        error.original_error = None
        if not (error.extensions or {}).get("code"):
            error.extensions = {
                **(error.extensions or {}),
                "code": ErrorCode.GRAPHQL_VALIDATION_FAILED,
            }
    return errors


def operation_name_refusal(
    query: str | None, operation_name: str | None, max_tokens: int
) -> GraphQLError | None:
    """The GraphQL spec's refusal of an operation name that names no operation of the
    document (empty included), or of a document with several operations and no name
    (strawberry would run the first); None when the name picks one operation."""
    if not query:
        return None
    try:
        document = parse_document(query, max_tokens)
    except GraphQLError:
        return None  # the usual path reports it
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if operation_name is not None:
        if any(op.name is not None and op.name.value == operation_name for op in operations):
            return None
        return GraphQLError(
            f"Unknown operation named {json.dumps(operation_name)}.",
            extensions={"code": ErrorCode.BAD_USER_INPUT, "field": ["operationName"]},
        )
    if len(operations) < 2:
        return None
    return GraphQLError(
        "Must provide operation name if query contains multiple operations.",
        extensions={"code": ErrorCode.BAD_USER_INPUT, "field": ["operationName"]},
    )


def hide_suggestion(error: GraphQLError, limits: QueryLimits) -> None:
    if not limits.field_suggestions and "Did you mean" in error.message:
        error.message = _SUGGESTION.sub("", error.message)


class OperationGuard(SchemaExtension):
    """Parses (refusing documents over the token limit or nested too deeply to parse) and
    validates before strawberry would, so its own steps find the work done; afterwards masks
    unexpected errors (the client gets INTERNAL_SERVER_ERROR and the request id, the log the
    rest), codes the pre-execution errors and hides suggestions."""

    def __init__(self, limits: QueryLimits) -> None:
        self.limits = limits
        self.streamed = False

    def on_operation(self) -> Iterator[None]:
        self.execution_context.validation_rules = self.limits.rules_for(self._authenticated())
        yield
        if not self.streamed:  # each streamed result was finished as it went out
            result = self.execution_context.result
            self._finish(getattr(result, "initial_result", result))

    def on_stream_result(self, result: StreamExecutionResult) -> Iterator[None]:
        # Over WebSocket (and SSE) each result is sent before the operation ends: finish
        # it here, pre-execution errors included, as `on_operation` finishes HTTP's.
        self.streamed = True
        self._finish(result)
        for name in ("incremental", "completed"):
            for part in getattr(result, name, None) or ():
                self._finish(part)
        yield

    def on_parse(self) -> Iterator[None]:
        ctx = self.execution_context
        try:
            ctx.graphql_document = parse_document(ctx.query or "", self.limits.max_tokens)
        except GraphQLError as refused:
            # Refused as strawberry refuses what fails validation, so that every transport
            # (streaming ones included) answers it: a stand-in document, never executed.
            ctx.graphql_document = _NOTHING_TO_RUN
            ctx.pre_execution_errors = [refused]
            yield
            return
        # Validating here spares strawberry's validation step a hook of its own; it runs
        # only when `pre_execution_errors` is still None.
        errors = validate_document(
            graphql_schema(ctx.schema), ctx.graphql_document, self.limits, self._authenticated()
        )
        ctx.pre_execution_errors = errors
        yield

    def _authenticated(self) -> bool:
        return getattr(self.execution_context.context, "actor", None) is not None

    def _finish(self, result: object) -> None:
        """Faults masked, suggestions hidden, and errors before execution coded."""
        errors = getattr(result, "errors", None)
        if not errors:
            return
        errors = mask(errors, self.execution_context.context)
        for error in errors:
            hide_suggestion(error, self.limits)
            if error.path is None and not (error.extensions or {}).get("code"):
                error.extensions = {**(error.extensions or {}), "code": client_code(error)}
        result.errors = errors  # type: ignore[attr-defined]
