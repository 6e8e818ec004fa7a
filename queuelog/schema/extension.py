"""The one schema extension every operation runs through: cached parsing under the token
limit, cached validation under the prebuilt rules, error codes for what is refused before
execution, and masking of unexpected errors.

One extension with two hooks rather than four extensions: strawberry builds a context
manager per hook per extension on every request, which cost more than the work they wrapped.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

from graphql import DocumentNode, GraphQLError, GraphQLSyntaxError
from strawberry.extensions import MaskErrors, ParserCache, ValidationCache

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


class OperationGuard(MaskErrors):
    """Parses (refusing documents over the token limit or nested too deeply to parse) and
    validates before strawberry would, so its own steps find the work done; afterwards masks
    unexpected errors (the client gets INTERNAL_SERVER_ERROR and the request id, the log the
    rest), codes the pre-execution errors and hides suggestions."""

    def __init__(self, limits: QueryLimits) -> None:
        super().__init__(should_mask_error=_unexpected, error_message="Internal server error")
        self.limits = limits
        self.validation_errors: list[GraphQLError] = []

    def on_operation(self) -> Iterator[None]:
        self.execution_context.validation_rules = self.limits.rules
        yield from super().on_operation()
        result = self.execution_context.result
        for error in getattr(result, "errors", None) or ():
            if not self.limits.field_suggestions and "Did you mean" in error.message:
                error.message = _SUGGESTION.sub("", error.message)
            if error.path is None and not (error.extensions or {}).get("code"):
                error.extensions = {**(error.extensions or {}), "code": self._code(error)}

    def on_parse(self) -> Iterator[None]:
        ctx = self.execution_context
        ctx.graphql_document = self._parse(ctx.query or "")
        # Validating here spares strawberry's validation step a hook of its own; it runs
        # only when `pre_execution_errors` is still None.
        errors = _validate(ctx.schema._schema, ctx.graphql_document, ctx.validation_rules)
        ctx.pre_execution_errors = errors
        self.validation_errors = errors
        yield

    def _parse(self, query: str) -> DocumentNode:
        max_tokens = self.limits.max_tokens
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

    def anonymise_error(self, error: GraphQLError) -> GraphQLError:
        request = getattr(self.execution_context.context, "request", None)
        request_id = None if request is None else request.scope.get("state", {}).get("request_id")
        log.error(
            "unexpected error (request %s) at %s",
            request_id,
            error.path,
            exc_info=error.original_error,
        )
        masked = super().anonymise_error(error)
        masked.extensions = {"code": "INTERNAL_SERVER_ERROR", "requestId": request_id}
        return masked

    def _code(self, error: GraphQLError) -> str:
        if isinstance(error, GraphQLSyntaxError):
            return "GRAPHQL_PARSE_FAILED"
        if any(error is e for e in self.validation_errors):
            return "GRAPHQL_VALIDATION_FAILED"
        return "BAD_USER_INPUT"  # variables that do not coerce, an unknown operation name
