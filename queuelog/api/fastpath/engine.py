"""The fast path's parts, for the schema assembly: prepared operations, the executor that
shares subscription results, and inputs built straight from graphql-core's values."""

from __future__ import annotations

from collections.abc import Callable

from graphql import DocumentNode, GraphQLError, GraphQLSchema

from queuelog.api.fastpath.executor import Executor, SharedEvents
from queuelog.api.fastpath.inputs import build_inputs_from_coerced_leaves
from queuelog.api.fastpath.prepared import Commuting, PreparedOperations


class FastPath:
    executor_class = Executor

    def __init__(self) -> None:
        build_inputs_from_coerced_leaves()
        self.events = SharedEvents()

    def prepared_operations(
        self,
        schema: GraphQLSchema,
        parse: Callable[[str], DocumentNode],
        validate: Callable[[DocumentNode], list[GraphQLError]],
        commuting: Commuting | None = None,
    ) -> PreparedOperations:
        return PreparedOperations(schema, parse, validate, commuting=commuting)
