"""Completion for prepared operations (`queuelog.api.fastpath.prepared`): below the root fields,
each selection set compiled once into functions that read the resolved objects' attributes
and coerce leaves with the schema's scalars and enums, locating errors and propagating nulls
as graphql-core's `complete_value` does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLSchema,
    InlineFragmentNode,
    SelectionSetNode,
    is_leaf_type,
    located_error,
)
from graphql.pyutils import Path, Undefined, is_iterable

from queuelog.fences.graphql_core import complete_leaf_value

# A completer turns a resolved value into its response value: (value, path, errors).
Complete = Callable[[Any, Path, list[GraphQLError]], Any]


class NotPreparable(Exception):
    """The operation uses something only the generic executor does."""


class NullPropagates(Exception):
    """An error at a non-null position: its null moves up to the nearest nullable one."""

    def __init__(self, error: GraphQLError) -> None:
        self.error = error


def handled(raw: Exception, nodes: list[FieldNode], path: Path, non_null: bool) -> GraphQLError:
    """graphql-core's handle_field_error: the error located at `path`, raised on as a null
    to propagate when the position is non-null, returned to be recorded otherwise."""
    if isinstance(raw, NullPropagates):
        if non_null:
            raise raw
        return raw.error
    error = located_error(raw, nodes, path.as_list())
    if non_null:
        raise NullPropagates(error) from None
    return error


def _leaf(type_: Any) -> Complete:
    def leaf(value: Any, path: Path, errors: list[GraphQLError]) -> Any:
        if value is None or value is Undefined:
            return None
        return complete_leaf_value(type_, value)  # graphql-core's own, its error included

    return leaf


def _non_null(inner: Complete, owner: str, name: str) -> Complete:
    def non_null(value: Any, path: Path, errors: list[GraphQLError]) -> Any:
        completed = inner(value, path, errors)
        if completed is None:
            raise TypeError(f"Cannot return null for non-nullable field {owner}.{name}.")
        return completed

    return non_null


def _list(
    item: Complete, item_non_null: bool, nodes: list[FieldNode], owner: str, name: str
) -> Complete:
    def complete_list(value: Any, path: Path, errors: list[GraphQLError]) -> Any:
        if value is None or value is Undefined:
            return None
        if not is_iterable(value):
            raise GraphQLError(
                f"Expected Iterable, but did not find one for field '{owner}.{name}'."
            )
        out = []
        for index, element in enumerate(value):
            item_path = path.add_key(index, None)
            try:
                if isinstance(element, Exception):
                    raise element
                out.append(item(element, item_path, errors))
            except Exception as raw:
                errors.append(handled(raw, nodes, item_path, item_non_null))
                out.append(None)
        return out

    return complete_list


def typename(value: Any, path: Path, errors: list[GraphQLError]) -> Any:
    raise AssertionError("__typename is written where it is collected")  # pragma: no cover


@dataclass(frozen=True, slots=True)
class _Field:
    key: str
    attribute: str | None  # None: __typename
    complete: Complete
    nodes: list[FieldNode]
    non_null: bool


def _object(type_: GraphQLObjectType, fields: Sequence[_Field]) -> Complete:
    typename = type_.name

    def complete_object(value: Any, path: Path, errors: list[GraphQLError]) -> Any:
        if value is None or value is Undefined:
            return None
        out: dict[str, Any] = {}
        for f in fields:
            if f.attribute is None:
                out[f.key] = typename
                continue
            field_path = path.add_key(f.key, typename)
            try:
                resolved = getattr(value, f.attribute)
                if isinstance(resolved, Exception):
                    raise resolved
                out[f.key] = f.complete(resolved, field_path, errors)
            except Exception as raw:
                errors.append(handled(raw, f.nodes, field_path, f.non_null))
                out[f.key] = None
        return out

    return complete_object


class Compiler:
    def __init__(self, schema: GraphQLSchema, document: DocumentNode) -> None:
        self.schema = schema
        self.fragments = {
            d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
        }

    def collect(
        self, type_: GraphQLObjectType, sets: Sequence[SelectionSetNode]
    ) -> dict[str, list[FieldNode]]:
        """graphql-core's collect_fields for an object type and no directives: the fields by
        response key in first-seen order, each fragment spread once."""
        fields: dict[str, list[FieldNode]] = {}
        visited: set[str] = set()

        def visit(selection_set: SelectionSetNode) -> None:
            for node in selection_set.selections:
                if node.directives:
                    raise NotPreparable
                if isinstance(node, FieldNode):
                    key = node.alias.value if node.alias else node.name.value
                    fields.setdefault(key, []).append(node)
                elif isinstance(node, InlineFragmentNode):
                    self._condition(node.type_condition, type_)
                    visit(node.selection_set)
                elif isinstance(node, FragmentSpreadNode):
                    name = node.name.value
                    if name in visited:
                        continue
                    visited.add(name)
                    fragment = self.fragments[name]
                    if fragment.directives or fragment.variable_definitions:
                        raise NotPreparable
                    self._condition(fragment.type_condition, type_)
                    visit(fragment.selection_set)

        for selection_set in sets:
            visit(selection_set)
        return fields

    @staticmethod
    def _condition(condition: Any, type_: GraphQLObjectType) -> None:
        if condition is not None and condition.name.value != type_.name:
            raise NotPreparable

    def value(
        self, type_: GraphQLOutputType, nodes: list[FieldNode], owner: str, name: str
    ) -> Complete:
        if isinstance(type_, GraphQLNonNull):
            return _non_null(self.value(type_.of_type, nodes, owner, name), owner, name)
        if isinstance(type_, GraphQLList):
            item = type_.of_type
            complete = self.value(item, nodes, owner, name)
            return _list(complete, isinstance(item, GraphQLNonNull), nodes, owner, name)
        if is_leaf_type(type_):
            return _leaf(type_)
        if isinstance(type_, GraphQLObjectType) and type_.is_type_of is None:
            sets = [n.selection_set for n in nodes if n.selection_set]
            return _object(type_, self.object_fields(type_, sets))
        raise NotPreparable  # interfaces and unions

    def object_fields(
        self, type_: GraphQLObjectType, sets: Sequence[SelectionSetNode]
    ) -> list[_Field]:
        out = []
        for key, nodes in self.collect(type_, sets).items():
            name = nodes[0].name.value
            if name == "__typename":
                out.append(_Field(key, None, typename, nodes, True))
                continue
            field = type_.fields[name]  # validation saw to it
            definition = field.extensions.get("strawberry-definition")
            if (
                definition is None
                or not definition.is_basic_field
                or definition.default_resolver is not getattr
                or field.args
            ):
                raise NotPreparable  # a resolver of its own below the root
            complete = self.value(field.type, nodes, type_.name, name)
            non_null = isinstance(field.type, GraphQLNonNull)
            out.append(_Field(key, definition.python_name, complete, nodes, non_null))
        return out
