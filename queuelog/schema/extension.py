"""The one schema extension every operation runs through: cached parsing under the token
limit, cached validation under the prebuilt rules, error codes for what is refused before
execution, and masking of unexpected errors.

One extension with two hooks rather than four extensions: strawberry builds a context
manager per hook per extension on every request, which cost more than the work they wrapped;
`LeanRunner` makes a stage that no extension hooks cost nothing and a stage one extension
hooks cost one generator.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import re
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

from graphql import (
    DocumentNode,
    GraphQLError,
    GraphQLSchema,
    GraphQLSyntaxError,
    OperationDefinitionNode,
)
from strawberry.extensions import ParserCache, SchemaExtension, ValidationCache
from strawberry.extensions.runner import SchemaExtensionsRunner
from strawberry.types import StreamExecutionResult

from queuelog.schema.limits import TOO_COMPLEX, QueryLimits, too_complex

log = logging.getLogger("queuelog.errors")
_SUGGESTION = re.compile(r"\s*Did you mean .*$", re.DOTALL)
# strawberry keeps both LRU caches at module level, keyed by size: every request shares them.
_parse = ParserCache(maxsize=1024).cached_parse_document
_validate = ValidationCache(maxsize=1024).cached_validate_document


def _unexpected(error: GraphQLError) -> bool:
    """Mask every error that is not one of ours (GraphQLErrors carry their own code)."""
    original = error.original_error
    return original is not None and not isinstance(original, GraphQLError)


def parse_document(query: str, max_tokens: int) -> DocumentNode:
    """Parse (cached), refusing documents over the token limit or nested too deeply."""
    try:
        document: DocumentNode = _parse(query, max_tokens=max_tokens)
    except GraphQLSyntaxError as exc:
        if "tokens" in exc.message and "Parsing aborted" in exc.message:
            raise too_complex(
                "maxTokens", "QUEUELOG_MAX_TOKENS", max_tokens + 1, max_tokens, "token count"
            ) from None
        exc.extensions = {"code": "GRAPHQL_PARSE_FAILED"}
        raise
    except RecursionError:
        raise GraphQLError(
            "the document is nested too deeply to parse",
            extensions={"code": TOO_COMPLEX, "limit": "nesting"},
        ) from None
    return document


def validate_document(
    schema: GraphQLSchema, document: DocumentNode, limits: QueryLimits, authenticated: bool = True
) -> list[GraphQLError]:
    """Validate (cached) under the schema's rules and limits (the lower cost ceiling for a
    request without a key). Validation errors are the client's: any exception a rule met on
    the way is the cause of none of them, so none is masked. A rule that raises is a fault
    of ours, reported as one error that `mask` turns into INTERNAL_SERVER_ERROR."""
    try:
        errors: list[GraphQLError] = _validate(schema, document, limits.rules_for(authenticated))
    except Exception as exc:  # any fault of a rule, answered as one error
        return [GraphQLError("a validation rule failed", original_error=exc)]
    for error in errors:
        error.original_error = None
    return errors


def missing_operation_name(
    query: str | None, operation_name: str | None, max_tokens: int
) -> GraphQLError | None:
    """The GraphQL spec's refusal of a document with several operations and no operation
    name (strawberry would run the first); None when the request names one or has one."""
    if operation_name is not None or not query:
        return None
    try:
        document = parse_document(query, max_tokens)
    except GraphQLError:
        return None  # the usual path reports it
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if len(operations) < 2:
        return None
    return GraphQLError(
        "Must provide operation name if query contains multiple operations.",
        extensions={"code": "BAD_USER_INPUT", "field": ["operationName"]},
    )


def hide_suggestion(error: GraphQLError, limits: QueryLimits) -> None:
    if not limits.field_suggestions and "Did you mean" in error.message:
        error.message = _SUGGESTION.sub("", error.message)


def mask(errors: list[GraphQLError], context: object) -> list[GraphQLError]:
    """Every unexpected error replaced by INTERNAL_SERVER_ERROR and the request id, for the
    client; the log gets the rest."""
    return [_masked(e, context) if _unexpected(e) else e for e in errors]


def _masked(error: GraphQLError, context: object) -> GraphQLError:
    request = getattr(context, "request", None)
    request_id = None if request is None else request.scope.get("state", {}).get("request_id")
    log.error(
        "unexpected error (request %s) at %s",
        request_id,
        error.path,
        exc_info=error.original_error,
    )
    return GraphQLError(
        "Internal server error",
        nodes=error.nodes,
        source=error.source,
        positions=error.positions,
        path=error.path,
        extensions={"code": "INTERNAL_SERVER_ERROR", "requestId": request_id},
    )


class OperationGuard(SchemaExtension):
    """Parses (refusing documents over the token limit or nested too deeply to parse) and
    validates before strawberry would, so its own steps find the work done; afterwards masks
    unexpected errors (the client gets INTERNAL_SERVER_ERROR and the request id, the log the
    rest), codes the pre-execution errors and hides suggestions.

    The masking is strawberry's MaskErrors minus its runtime-checked Protocol, whose
    isinstance alone cost more than the rest of this extension."""

    def __init__(self, limits: QueryLimits) -> None:
        self.limits = limits
        self.validation_errors: list[GraphQLError] = []
        self.streamed = False

    def on_operation(self) -> Iterator[None]:
        self.execution_context.validation_rules = self.limits.rules_for(self._authenticated())
        yield
        result = self.execution_context.result
        if not self.streamed:  # each streamed result was masked as it went out
            self._mask(getattr(result, "initial_result", result))
        for error in getattr(result, "errors", None) or ():
            hide_suggestion(error, self.limits)
            if error.path is None and not (error.extensions or {}).get("code"):
                error.extensions = {**(error.extensions or {}), "code": self._code(error)}

    def on_stream_result(self, result: StreamExecutionResult) -> Iterator[None]:
        self.streamed = True
        self._mask(result)
        for name in ("incremental", "completed"):
            for part in getattr(result, name, None) or ():
                self._mask(part)
        yield

    def on_parse(self) -> Iterator[None]:
        ctx = self.execution_context
        ctx.graphql_document = parse_document(ctx.query or "", self.limits.max_tokens)
        # Validating here spares strawberry's validation step a hook of its own; it runs
        # only when `pre_execution_errors` is still None.
        errors = validate_document(
            ctx.schema._schema, ctx.graphql_document, self.limits, self._authenticated()
        )
        ctx.pre_execution_errors = errors
        self.validation_errors = errors
        yield

    def _authenticated(self) -> bool:
        return getattr(self.execution_context.context, "actor", None) is not None

    def _mask(self, result: object) -> None:
        errors = getattr(result, "errors", None)
        if errors:
            result.errors = mask(errors, self.execution_context.context)  # type: ignore[attr-defined]

    def _code(self, error: GraphQLError) -> str:
        if isinstance(error, GraphQLSyntaxError):
            return "GRAPHQL_PARSE_FAILED"
        if any(error is e for e in self.validation_errors):
            return "GRAPHQL_VALIDATION_FAILED"
        return "BAD_USER_INPUT"  # variables that do not coerce, an unknown operation name


class _OneHook:
    """One extension's generator hook as the sync and async context manager strawberry's
    runner would build for it, without the exit stack around it."""

    __slots__ = ("manager",)

    def __init__(self, hook: Callable[[], Iterator[None]]) -> None:
        self.manager = contextlib.contextmanager(hook)()

    def __enter__(self) -> None:
        self.manager.__enter__()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return self.manager.__exit__(kind, exc, tb)

    async def __aenter__(self) -> None:
        self.manager.__enter__()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return self.manager.__exit__(kind, exc, tb)


_NOTHING = contextlib.nullcontext()


_KINDS: dict[tuple[type, str], str | None] = {}


def _hook_kind(extension: type, name: str) -> str | None:
    """None when `extension` leaves the hook `name` alone, "generator" for a generator."""
    kind = _KINDS.get((extension, name), "?")
    if kind == "?":
        hook = getattr(extension, name)
        if hook is getattr(SchemaExtension, name):
            kind = None
        else:
            kind = "generator" if inspect.isgeneratorfunction(hook) else "other"
        _KINDS[extension, name] = kind
    return kind


class LeanRunner(SchemaExtensionsRunner):
    """strawberry's runner, minus its per-stage machinery where no extension or a single
    generator hook is involved; anything else gets strawberry's own context managers."""

    def _stage(self, name: str, generic: Callable[[], Any]) -> Any:
        hooked = [e for e in self.extensions if _hook_kind(type(e), name)]
        if not hooked:
            return _NOTHING
        if len(hooked) == 1 and _hook_kind(type(hooked[0]), name) == "generator":
            return _OneHook(getattr(hooked[0], name))
        return generic()

    def operation(self) -> Any:
        return self._stage("on_operation", super().operation)

    def parsing(self) -> Any:
        return self._stage("on_parse", super().parsing)

    def validation(self) -> Any:
        return self._stage("on_validate", super().validation)

    def executing(self) -> Any:
        return self._stage("on_execute", super().executing)
