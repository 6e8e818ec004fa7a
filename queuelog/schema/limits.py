"""Query limits: depth, aliases, tokens, directives and cost, refused before execution.

The rules are classes built once per schema (`QueryLimits.build`), so the tuple of validation
rules is the same object on every request and the validation cache keeps hitting. Each limit
reports one top-level error with `extensions.code = QUERY_TOO_COMPLEX` naming the limit.
`queuelog.schema.extension` installs them and enforces the token limit while parsing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphql import (
    ASTValidationRule,
    DirectiveNode,
    DocumentNode,
    FieldNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLField,
    GraphQLInterfaceType,
    GraphQLObjectType,
    InlineFragmentNode,
    IntValueNode,
    ListValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    ValidationContext,
    ValidationRule,
    get_named_type,
    get_nullable_type,
    is_composite_type,
    is_list_type,
    specified_rules,
)
from graphql.language import Node
from graphql.validation import MaxIntrospectionDepthRule, NoSchemaIntrospectionCustomRule

from queuelog.config import Settings

TOO_COMPLEX = "QUERY_TOO_COMPLEX"
# Arguments that size a list: its length multiplies the cost of everything below it.
SIZE_ARGS = ("first", "limit", "inputs")
# A size given by a variable is unknown when the document is validated (and validation is
# cached per document): assume the largest page the service accepts.
VARIABLE_SIZE = 100


def too_complex(limit: str, setting: str, actual: int, maximum: int, what: str) -> GraphQLError:
    return GraphQLError(
        f"{what} {actual} exceeds the limit of {maximum} ({setting})",
        extensions={"code": TOO_COMPLEX, "limit": limit, "actual": actual, "max": maximum},
    )


# -- measures -----------------------------------------------------------------------------


def _depth(ctx: ValidationContext, sel: SelectionSetNode, memo: dict[str, int]) -> int:
    """The deepest chain of fields below `sel`; introspection is left to its own rule."""
    best = 0
    for node in sel.selections:
        if isinstance(node, FieldNode):
            if node.name.value.startswith("__"):
                continue
            d = 1 + (_depth(ctx, node.selection_set, memo) if node.selection_set else 0)
        elif isinstance(node, InlineFragmentNode):
            d = _depth(ctx, node.selection_set, memo)
        elif isinstance(node, FragmentSpreadNode):
            d = _fragment(ctx, node.name.value, memo, lambda f: _depth(ctx, f, memo))
        else:  # pragma: no cover - the three selection kinds above are all there are
            continue
        best = max(best, d)
    return best


def _fragment(ctx: ValidationContext, name: str, memo: dict[str, int], measure: Any) -> int:
    """Measure a fragment once; a fragment met again while measuring it (a cycle, which
    NoFragmentCyclesRule refuses) counts as nothing."""
    if name in memo:
        return memo[name]
    fragment = ctx.get_fragment(name)
    if fragment is None:
        return 0
    memo[name] = 0
    memo[name] = int(measure(fragment.selection_set))
    return memo[name]


def _size(node: FieldNode, field: GraphQLField) -> int:
    """How many items the field asks for: its size argument as written, else its default."""
    given = {arg.name.value: arg.value for arg in node.arguments or ()}
    for name in SIZE_ARGS:
        value = given.get(name)
        if isinstance(value, IntValueNode):
            return max(int(value.value), 0)
        if isinstance(value, ListValueNode):
            return len(value.values)
        if value is not None:
            return VARIABLE_SIZE
        arg = field.args.get(name)
        if arg is not None and isinstance(arg.default_value, int):
            return max(arg.default_value, 0)
    return 1


def _cost(ctx: ValidationContext, sel: SelectionSetNode, parent: Any, memo: dict[str, int]) -> int:
    """How many objects the selection yields at most: a list field sized by `first`,
    `limit` or `inputs` yields that many, and multiplies everything below it."""
    total = 0
    for node in sel.selections:
        if isinstance(node, FieldNode):
            if node.selection_set is None or node.name.value.startswith("__"):
                continue
            if not isinstance(parent, GraphQLObjectType | GraphQLInterfaceType):
                continue
            field = parent.fields.get(node.name.value)
            if field is None:
                continue
            named = get_named_type(field.type)
            if not is_composite_type(named):
                continue
            n = _size(node, field)
            own = n if is_list_type(get_nullable_type(field.type)) else 1
            total += own + n * _cost(ctx, node.selection_set, named, memo)
        elif isinstance(node, InlineFragmentNode):
            cond = node.type_condition
            inner = ctx.schema.get_type(cond.name.value) if cond else parent
            total += _cost(ctx, node.selection_set, inner, memo)
        elif isinstance(node, FragmentSpreadNode):
            fragment = ctx.get_fragment(node.name.value)
            if fragment is not None:
                inner = ctx.schema.get_type(fragment.type_condition.name.value)
                total += _fragment(
                    ctx, node.name.value, memo, lambda f, t=inner: _cost(ctx, f, t, memo)
                )
    return total


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

    @classmethod
    def from_settings(cls, s: Settings) -> QueryLimits:
        return cls.build(
            max_depth=s.max_depth,
            max_aliases=s.max_aliases,
            max_tokens=s.max_tokens,
            max_directives=s.max_directives,
            max_cost=s.max_cost,
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
        introspection: bool = True,
        field_suggestions: bool = False,
    ) -> QueryLimits:
        rules: list[type[ASTValidationRule]] = [
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
                lambda ctx, op, memo: _depth(ctx, op.selection_set, memo),
            ),
            _operation_rule(
                "maxCost",
                "QUEUELOG_MAX_COST",
                "query cost",
                max_cost,
                lambda ctx, op, memo: _cost(
                    ctx, op.selection_set, ctx.schema.get_root_type(op.operation), memo
                ),
            ),
        ]
        if not introspection:
            rules.append(NoSchemaIntrospectionCustomRule)
        return cls(
            max_depth,
            max_aliases,
            max_tokens,
            max_directives,
            max_cost,
            introspection,
            field_suggestions,
            tuple(rules),
        )


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
        def enter_operation_definition(self, node: OperationDefinitionNode, *_args: Any) -> None:
            value = int(measure(self.context, node, {}))
            if value > maximum:
                self.report_error(too_complex(limit, setting, value, maximum, what))

    PerOperation.__name__ = f"{limit[0].upper()}{limit[1:]}Rule"
    return PerOperation
