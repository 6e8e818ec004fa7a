"""Query limits: depth, aliases, tokens, directives and cost, refused before execution.

The rules are classes built once per schema (`QueryLimits.build`), so the tuple of validation
rules is the same object on every request and the validation cache keeps hitting. Each limit
reports one top-level error with `extensions.code = QUERY_TOO_COMPLEX` naming the limit.
`queuelog.api.extension` installs them and enforces the token limit while parsing.

The cost rule bounds what one operation may make the server build, whatever path reaches it
(aliases, fragments, `nodes` and `edges`, `events { job }`, introspection): how many objects
it yields at most (`maxCost`, lower for requests without a key: `maxAnonymousCost`), and how
many bytes its large leaves (JSON values, error texts) may carry at most (`maxResponseBytes`,
the ceiling the encoded response is held to as well). What the depth and cost rules
measure is computed in `queuelog.api.measures`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphql import (
    ASTValidationRule,
    DirectiveNode,
    DocumentNode,
    FieldNode,
    GraphQLError,
    OperationDefinitionNode,
    ValidationContext,
    ValidationRule,
    specified_rules,
)
from graphql.language import Node
from graphql.validation import MaxIntrospectionDepthRule, NoSchemaIntrospectionCustomRule

from queuelog.api.measures import Weights, operation_cost, query_depth
from queuelog.config import Settings
from queuelog.domain.codes import ErrorCode

TOO_COMPLEX = ErrorCode.QUERY_TOO_COMPLEX
UTF8_MAX = 4  # bytes a character may take in the response


def too_complex(limit: str, setting: str, actual: int, maximum: int, what: str) -> GraphQLError:
    return GraphQLError(
        f"{what} {actual} exceeds the limit of {maximum} ({setting})",
        extensions={"code": TOO_COMPLEX, "limit": limit, "actual": actual, "max": maximum},
    )


def response_too_large(actual: int, maximum: int) -> GraphQLError:
    """The answer for a response whose encoding exceeds the ceiling."""
    return too_complex(
        "maxResponseBytes",
        "QUEUELOG_MAX_RESPONSE_BYTES",
        actual,
        maximum,
        "response size in bytes",
    )


# -- the rules, built once ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueryLimits:
    max_depth: int
    max_aliases: int
    max_tokens: int
    max_directives: int
    max_cost: int
    introspection: bool
    field_suggestions: bool
    rules: tuple[type[ASTValidationRule], ...]
    # The same rules with the lower cost ceiling of requests without a key.
    anonymous_rules: tuple[type[ASTValidationRule], ...]
    max_anonymous_cost: int
    max_response_bytes: int

    @classmethod
    def from_settings(cls, s: Settings) -> QueryLimits:
        return cls.build(
            max_depth=s.max_depth,
            max_aliases=s.max_aliases,
            max_tokens=s.max_tokens,
            max_directives=s.max_directives,
            max_cost=s.max_cost,
            max_anonymous_cost=s.max_anonymous_cost,
            max_response_bytes=s.max_response_bytes,
            weights=Weights(
                json_bytes=s.payload_max_bytes, error_bytes=s.error_max_chars * UTF8_MAX
            ),
            introspection=s.introspection,
            field_suggestions=s.field_suggestions,
        )

    @classmethod
    def build(
        cls,
        *,
        max_depth: int,
        max_aliases: int,
        max_tokens: int,
        max_directives: int,
        max_cost: int,
        max_anonymous_cost: int | None = None,
        max_response_bytes: int = 16 * 1024 * 1024,
        weights: Weights | None = None,
        introspection: bool = True,
        field_suggestions: bool = False,
    ) -> QueryLimits:
        weights = weights or Weights(json_bytes=65_536, error_bytes=8_000)
        anonymous_cost = max_cost if max_anonymous_cost is None else max_anonymous_cost
        shared: list[type[ASTValidationRule]] = [
            *specified_rules,
            MaxIntrospectionDepthRule,
            _counting_rule(
                "maxAliases",
                "QUEUELOG_MAX_ALIASES",
                "alias count",
                max_aliases,
                lambda node: isinstance(node, FieldNode) and node.alias is not None,
            ),
            _counting_rule(
                "maxDirectives",
                "QUEUELOG_MAX_DIRECTIVES",
                "directive count",
                max_directives,
                lambda node: isinstance(node, DirectiveNode),
            ),
            _operation_rule(
                "maxDepth",
                "QUEUELOG_MAX_DEPTH",
                "query depth",
                max_depth,
                lambda ctx, op: query_depth(ctx, op.selection_set, {}),
            ),
            _operation_rule(
                "maxResponseBytes",
                "QUEUELOG_MAX_RESPONSE_BYTES",
                "largest response size in bytes (JSON values and error texts at their limits)",
                max_response_bytes,
                lambda ctx, op: operation_cost(ctx, op, weights).bytes,
            ),
        ]
        if not introspection:
            shared.append(NoSchemaIntrospectionCustomRule)

        def with_cost(
            limit: str, setting: str, maximum: int
        ) -> tuple[type[ASTValidationRule], ...]:
            what = "query cost" if limit == "maxCost" else "query cost without an API key"
            rule = _operation_rule(
                limit,
                setting,
                what,
                maximum,
                lambda ctx, op: operation_cost(ctx, op, weights).objects,
            )
            return (*shared, rule)

        return cls(
            max_depth,
            max_aliases,
            max_tokens,
            max_directives,
            max_cost,
            introspection,
            field_suggestions,
            with_cost("maxCost", "QUEUELOG_MAX_COST", max_cost),
            with_cost("maxAnonymousCost", "QUEUELOG_MAX_ANONYMOUS_COST", anonymous_cost),
            anonymous_cost,
            max_response_bytes,
        )

    def rules_for(self, authenticated: bool) -> tuple[type[ASTValidationRule], ...]:
        return self.rules if authenticated else self.anonymous_rules


def _counting_rule(
    limit: str, setting: str, what: str, maximum: int, counts: Any
) -> type[ValidationRule]:
    class Counting(ValidationRule):
        def __init__(self, context: ValidationContext) -> None:
            super().__init__(context)
            self.count = 0

        def enter(self, node: Node, *_args: Any) -> None:
            if counts(node):
                self.count += 1

        def leave_document(self, node: DocumentNode, *_args: Any) -> None:
            if self.count > maximum:
                self.report_error(too_complex(limit, setting, self.count, maximum, what))

    Counting.__name__ = f"{limit[0].upper()}{limit[1:]}Rule"
    return Counting


def _operation_rule(
    limit: str, setting: str, what: str, maximum: int, measure: Any
) -> type[ValidationRule]:
    class PerOperation(ValidationRule):
        # On leaving: a limit is reported after what the rules of single fields found.
        def leave_operation_definition(self, node: OperationDefinitionNode, *_args: Any) -> None:
            value = int(measure(self.context, node))
            if value > maximum:
                self.report_error(too_complex(limit, setting, value, maximum, what))

    PerOperation.__name__ = f"{limit[0].upper()}{limit[1:]}Rule"
    return PerOperation
