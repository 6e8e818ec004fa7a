"""What the query limits measure in an operation: the depth of its fields, and its cost, the
most objects it can make the server build and the most bytes its large leaves can carry.

`queuelog.api.limits` turns these measures into validation rules.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from graphql import (
    FieldNode,
    FragmentSpreadNode,
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
    get_named_type,
    get_nullable_type,
    is_composite_type,
    is_input_object_type,
    is_interface_type,
    is_list_type,
    is_object_type,
)

from queuelog.service.throughput import BUCKETS_MAX

# Arguments that size a list: its length multiplies the cost of everything below it.
SIZE_ARGS = ("first", "limit", "inputs")
# A size given by a variable is unknown when the document is validated (and validation is
# cached per document): assume the largest page the service accepts.
VARIABLE_SIZE = 100
# A size literal longer than this is past any bound the service accepts; it is not turned
# into a Python int (a literal of thousands of digits would raise while converting).
SIZE_DIGITS = 9
# Lists without a size argument, charged by the work they do: a throughput read sums up
# to BUCKETS_MAX buckets from rollup rows and events (about four pages of jobs' worth);
# schedules and apiKeys read a whole table each.
LIST_WEIGHTS = {
    ("Query", "throughput"): 4 * BUCKETS_MAX,
    ("Query", "schedules"): 1_000,
    ("Query", "apiKeys"): 1_000,
}
# Leaves that can carry large values: the JSON scalar (payloads, results), and error texts.
JSON_SCALAR = "JSON"
ERROR_FIELDS = frozenset({("Job", "error")})


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


def query_depth(ctx: ValidationContext, sel: SelectionSetNode, memo: dict[str, Any]) -> int:
    """The deepest chain of fields below `sel`; introspection is left to its own rule."""
    best = 0
    for node in sel.selections:
        if isinstance(node, FieldNode):
            if node.name.value.startswith("__"):
                continue
            d = 1 + (query_depth(ctx, node.selection_set, memo) if node.selection_set else 0)
        elif isinstance(node, InlineFragmentNode):
            d = query_depth(ctx, node.selection_set, memo)
        elif isinstance(node, FragmentSpreadNode):
            d = _fragment(ctx, node.name.value, memo, 0, lambda f: query_depth(ctx, f, memo))
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
            where = (parent.name, node.name.value)
            unsized = LIST_WEIGHTS.get(where) or _unsized_lists(ctx.schema).get(where, 1)
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


def operation_cost(ctx: ValidationContext, op: OperationDefinitionNode, weights: Weights) -> Cost:
    root = ctx.schema.get_root_type(op.operation)
    return _cost(ctx, op.selection_set, root, {}, weights)
