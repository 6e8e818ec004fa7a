"""Variables of prepared operations coerced as graphql-core coerces them, with the type
tree walked once per operation instead of once per value.

Each function mirrors graphql-core's step by step; where a value is anything but plainly
valid it defers to graphql-core, so the answer, and every error message, is graphql-core's.
`tests/test_coerce.py` holds the two against each other.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection
from typing import Any

from graphql import (
    GraphQLError,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLSchema,
    VariableDefinitionNode,
)
from graphql.execution import VariableValues, get_variable_values
from graphql.pyutils import Undefined, is_iterable
from graphql.type import is_leaf_type, is_required_input_field

from queuelog.fences.graphql_core import (
    MAX_NESTING_DEPTH,
    VariableValueSource,
    coerce_default_value,
    get_variable_signature,
)

# -- variables ----------------------------------------------------------------------------

Coerce = Callable[[Any], Any]  # the coerced value, or Undefined when it does not coerce


class _Unknown(Exception):
    """A type this module leaves to graphql-core."""


def _depth(type_: GraphQLInputType, seen: frozenset[str] = frozenset()) -> int:
    """How deep graphql-core's nesting check can go in a value of `type_`: one level per
    list and input object, scalars (JSON among them) not followed."""
    if isinstance(type_, GraphQLNonNull):
        return _depth(type_.of_type, seen)
    if isinstance(type_, GraphQLList):
        return 1 + _depth(type_.of_type, seen)
    if isinstance(type_, GraphQLInputObjectType):
        if type_.name in seen:
            raise _Unknown  # a recursive input type: no bound
        inner = seen | {type_.name}
        return 1 + max((_depth(f.type, inner) for f in type_.fields.values()), default=0)
    return 0


def _coercer(type_: GraphQLInputType) -> Coerce:
    """`coerce_input_value(value, type_)`, compiled."""
    if isinstance(type_, GraphQLNonNull):
        inner = _coercer(type_.of_type)

        def non_null(value: Any) -> Any:
            if value is None or value is Undefined:
                return Undefined
            return inner(value)

        return non_null
    if isinstance(type_, GraphQLList):
        item = _coercer(type_.of_type)

        def as_list(value: Any) -> Any:
            if value is None or value is Undefined:
                return None
            if not is_iterable(value):
                coerced = item(value)
                return Undefined if coerced is Undefined else [coerced]
            out = []
            for element in value:
                coerced = item(element)
                if coerced is Undefined:
                    return Undefined
                out.append(coerced)
            return out

        return as_list
    if isinstance(type_, GraphQLInputObjectType):
        if type_.is_one_of:
            raise _Unknown
        return _input_object(type_)
    if is_leaf_type(type_):
        coerce_leaf = type_.coerce_input_value

        def leaf(value: Any) -> Any:
            if value is None or value is Undefined:
                return None
            try:
                return coerce_leaf(value)
            except Exception:  # graphql-core's verdict too: not a valid value
                return Undefined

        return leaf
    raise _Unknown


def _input_object(type_: GraphQLInputObjectType) -> Coerce:
    fields = type_.fields
    # (name, out name, required, default, coercer) in definition order, as graphql-core
    # walks them; graphql-core memoizes each coerced default on its field, so every
    # request gets the same object from it as from here
    specs = [
        (
            name,
            f.out_name or name,
            is_required_input_field(f),
            Undefined if is_required_input_field(f) else coerce_default_value(f),
            _coercer(f.type),
        )
        for name, f in fields.items()
    ]
    out_type = type_.out_type

    def input_object(value: Any) -> Any:
        if value is None or value is Undefined:
            return None
        if not isinstance(value, dict):
            return Undefined
        for name, given in value.items():
            if given is not Undefined and name not in fields:
                return Undefined
        out: dict[str, Any] = {}
        for name, out_name, required, default, coerce in specs:
            given = value.get(name, Undefined)
            if given is Undefined:
                if required:
                    return Undefined
                if default is not Undefined:
                    out[out_name] = default
                continue
            coerced = coerce(given)
            if coerced is Undefined:
                return Undefined
            out[out_name] = coerced
        return out_type(out)

    return input_object


class Variables:
    """An operation's variables, coerced as `get_variable_values` coerces them."""

    def __init__(
        self, schema: GraphQLSchema, definitions: Collection[VariableDefinitionNode]
    ) -> None:
        self.schema = schema
        self.definitions = definitions
        self.specs: list[tuple[str, Any, bool, Coerce]] | None = None
        with contextlib.suppress(_Unknown):
            self.specs = [self._spec(node) for node in definitions]

    def _spec(self, node: VariableDefinitionNode) -> tuple[str, Any, bool, Coerce]:
        signature = get_variable_signature(self.schema, node)
        if isinstance(signature, GraphQLError) or node.default_value is not None:
            raise _Unknown
        if _depth(signature.type) > MAX_NESTING_DEPTH:
            raise _Unknown
        non_null = isinstance(signature.type, GraphQLNonNull)
        return signature.name, signature, non_null, _coercer(signature.type)

    def coerce(self, inputs: dict[str, Any]) -> VariableValues | list[GraphQLError]:
        specs = self.specs
        if specs is not None:
            sources: dict[str, VariableValueSource] = {}
            coerced: dict[str, Any] = {}
            for name, signature, non_null, coerce in specs:
                value = inputs.get(name, Undefined)
                if value is Undefined:
                    sources[name] = VariableValueSource(signature)
                    if not non_null:
                        continue
                else:
                    sources[name] = VariableValueSource(signature, value)
                result = coerce(value)
                if result is Undefined:
                    break  # graphql-core says why
                coerced[name] = result
            else:
                return VariableValues(sources, coerced)
        return get_variable_values(self.schema, self.definitions, inputs)
