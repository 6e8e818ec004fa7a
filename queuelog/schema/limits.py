"""Query limits: depth, aliases, tokens, directives and cost, refused before execution.

The rules are classes built once per schema (`QueryLimits.build`), so the tuple of validation
rules is the same object on every request and the validation cache keeps hitting. Each limit
reports one top-level error with `extensions.code = QUERY_TOO_COMPLEX` naming the limit.
`queuelog.schema.extension` installs them and enforces the token limit while parsing.

The cost rule bounds what one operation may make the server build, whatever path reaches it
(aliases, fragments, `nodes` and `edges`, `events { job }`, introspection): how many objects
it yields at most (`maxCost`, lower for requests without a key: `maxAnonymousCost`), and how
many bytes its large leaves (JSON values, error texts) may carry at most (`maxResponseBytes`,
the ceiling the encoded response is held to as well).
"""

from __future__ import annotations

import functools
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
    GraphQLSchema,
    InlineFragmentNode,
    IntValueNode,
    ListValueNode,
    OperationDefinitionNode,
    SchemaMetaFieldDef,
    SelectionSetNode,
    TypeMetaFieldDef,
    TypeNameMetaFieldDef,
    ValidationContext,
    ValidationRule,
    get_named_type,
    get_nullable_type,
    is_composite_type,
    is_input_object_type,
    is_interface_type,
    is_list_type,
    is_object_type,
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
# A size literal longer than this is past any bound the service accepts; it is not turned
# into a Python int (a literal of thousands of digits would raise while converting).
SIZE_DIGITS = 9
# Leaves that can carry large values: the JSON scalar (payloads, results), and error texts.
JSON_SCALAR = "JSON"
ERROR_FIELDS = frozenset({("Job", "error")})
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


# -- measures -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Weights:
    """What the cost rule charges: bytes per large leaf, and the length assumed for lists
    that take no size argument (introspection's: the schema's own averages)."""

    json_bytes: int
    error_bytes: int


@dataclass(slots=True)
class Cost:
    objects: int = 0
    bytes: int = 0

    def add(self, other: Cost, times: int = 1) -> None:
        self.objects += times * other.objects
        self.bytes += times * other.bytes


def _depth(ctx: ValidationContext, sel: SelectionSetNode, memo: dict[str, Any]) -> int:
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
            d = _fragment(ctx, node.name.value, memo, 0, lambda f: _depth(ctx, f, memo))
        else:  # pragma: no cover - the three selection kinds above are all there are
            continue
        best = max(best, d)
    return best


def _fragment(
    ctx: ValidationContext, name: str, memo: dict[str, Any], empty: Any, measure: Any
) -> Any:
    """Measure a fragment once; a fragment met again while measuring it (a cycle, which
    NoFragmentCyclesRule refuses) counts as `empty`."""
    if name in memo:
        return memo[name]
    fragment = ctx.get_fragment(name)
    if fragment is None:
        return empty
    memo[name] = empty
    memo[name] = measure(fragment.selection_set)
    return memo[name]


@functools.lru_cache(maxsize=8)
def _unsized_lists(schema: GraphQLSchema) -> dict[tuple[str, str], int]:
    """How many items introspection's lists yield on average per parent, from the schema:
    a walk over every type's fields' arguments costs what it really builds."""
    types = list(schema.type_map.values())
    composite = [t for t in types if is_object_type(t) or is_interface_type(t)]
    fields = [f for t in composite for f in t.fields.values()]

    def per(total: int, parents: int) -> int:
        return max(1, -(-total // max(parents, 1)))

    return {
        ("__Schema", "types"): len(types),
        ("__Schema", "directives"): len(schema.directives),
        ("__Type", "fields"): per(len(fields), len(types)),
        ("__Type", "inputFields"): per(
            sum(len(t.fields) for t in types if is_input_object_type(t)), len(types)
        ),
        ("__Type", "enumValues"): per(
            sum(len(getattr(t, "values", ())) for t in types), len(types)
        ),
        ("__Type", "interfaces"): per(sum(len(t.interfaces) for t in composite), len(types)),
        ("__Type", "possibleTypes"): per(
            sum(len(schema.get_possible_types(t)) for t in types if is_interface_type(t)),
            len(types),
        ),
        ("__Field", "args"): per(sum(len(f.args) for f in fields), len(fields)),
        ("__Directive", "args"): per(
            sum(len(d.args) for d in schema.directives), len(schema.directives)
        ),
    }


def _int_literal(value: IntValueNode) -> int:
    digits = value.value.lstrip("-")
    if len(digits) > SIZE_DIGITS:
        return 0 if value.value.startswith("-") else 10**SIZE_DIGITS
    return int(value.value)


def _size(node: FieldNode, field: GraphQLField, unsized: int) -> int:
    """How many items the field asks for: its size argument as written, else its default,
    else `unsized`."""
    given = {arg.name.value: arg.value for arg in node.arguments or ()}
    for name in SIZE_ARGS:
        value = given.get(name)
        if isinstance(value, IntValueNode):
            return max(_int_literal(value), 0)
        if isinstance(value, ListValueNode):
            return len(value.values)
        if value is not None:
            return VARIABLE_SIZE
        arg = field.args.get(name)
        if arg is not None and isinstance(arg.default_value, int):
            return max(arg.default_value, 0)
    return unsized


def _field(ctx: ValidationContext, parent: Any, name: str) -> GraphQLField | None:
    """The field `name` of `parent`, the introspection fields included."""
    if name == "__typename":
        return TypeNameMetaFieldDef
    if parent is ctx.schema.query_type and name in ("__schema", "__type"):
        return SchemaMetaFieldDef if name == "__schema" else TypeMetaFieldDef
    if isinstance(parent, GraphQLObjectType | GraphQLInterfaceType):
        field: GraphQLField | None = parent.fields.get(name)
        return field
    return None


def _leaf_bytes(parent: Any, name: str, field: GraphQLField, weights: Weights) -> int:
    if get_named_type(field.type).name == JSON_SCALAR:
        return weights.json_bytes
    if (getattr(parent, "name", None), name) in ERROR_FIELDS:
        return weights.error_bytes
    return 0


def _cost(
    ctx: ValidationContext,
    sel: SelectionSetNode,
    parent: Any,
    memo: dict[str, Any],
    weights: Weights,
) -> Cost:
    """The most the selection can make the server build: objects (a list field sized by
    `first`, `limit` or `inputs` yields that many, and multiplies everything below it), and
    the bytes of its large leaves."""
    total = Cost()
    for node in sel.selections:
        if isinstance(node, FieldNode):
            field = _field(ctx, parent, node.name.value)
            if field is None:
                continue
            named = get_named_type(field.type)
            if node.selection_set is None or not is_composite_type(named):
                total.bytes += _leaf_bytes(parent, node.name.value, field, weights)
                continue
            listed = is_list_type(get_nullable_type(field.type))
            unsized = _unsized_lists(ctx.schema).get((parent.name, node.name.value), 1)
            n = _size(node, field, unsized)
            total.objects += n if listed else 1
            total.add(_cost(ctx, node.selection_set, named, memo, weights), n)
        elif isinstance(node, InlineFragmentNode):
            cond = node.type_condition
            inner = ctx.schema.get_type(cond.name.value) if cond else parent
            total.add(_cost(ctx, node.selection_set, inner, memo, weights))
        elif isinstance(node, FragmentSpreadNode):
            fragment = ctx.get_fragment(node.name.value)
            if fragment is not None:
                inner = ctx.schema.get_type(fragment.type_condition.name.value)
                total.add(
                    _fragment(
                        ctx,
                        node.name.value,
                        memo,
                        Cost(),
                        lambda f, t=inner: _cost(ctx, f, t, memo, weights),
                    )
                )
    return total


def _operation_cost(ctx: ValidationContext, op: OperationDefinitionNode, weights: Weights) -> Cost:
    root = ctx.schema.get_root_type(op.operation)
    return _cost(ctx, op.selection_set, root, {}, weights)


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
                lambda ctx, op: _depth(ctx, op.selection_set, {}),
            ),
            _operation_rule(
                "maxResponseBytes",
                "QUEUELOG_MAX_RESPONSE_BYTES",
                "largest response size in bytes (JSON values and error texts at their limits)",
                max_response_bytes,
                lambda ctx, op: _operation_cost(ctx, op, weights).bytes,
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
                lambda ctx, op: _operation_cost(ctx, op, weights).objects,
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
