"""The graphql-core executor strawberry runs for what is not prepared: subscriptions above
all (`schema.prepared` covers the hot queries and mutations)."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import orjson
from graphql import ExecutionResult, GraphQLObjectType, OperationDefinitionNode, OperationType
from graphql.execution.collect_fields import CollectedFields, FieldDetailsList
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from queuelog.graphql_types import JobEvent

# What one subscription event's execution depends on: the operation (by identity: the
# document is parsed once and shared), its variables, the actor, and the event.
EventKey = tuple[int, bytes, Any, int]


class SharedEvents:
    """Results of subscription events, shared by the subscribers that would compute the same
    one: the same operation and variables, for the same actor, of the same event. A change
    fanned out to a thousand frontends that ask alike is executed once, not a thousand
    times. The newest MAX results are kept (an event is fanned out at once)."""

    MAX = 1_024

    def __init__(self) -> None:
        self._results: collections.OrderedDict[
            EventKey, tuple[OperationDefinitionNode, ExecutionResult | asyncio.Future[Any]]
        ] = collections.OrderedDict()

    def get(
        self, key: EventKey, operation: OperationDefinitionNode
    ) -> ExecutionResult | asyncio.Future[Any] | None:
        found = self._results.get(key)
        # Kept with its operation, whose id therefore cannot be another's meanwhile.
        return found[1] if found is not None and found[0] is operation else None

    def put(
        self,
        key: EventKey,
        operation: OperationDefinitionNode,
        result: ExecutionResult | asyncio.Future[Any],
    ) -> None:
        self._results[key] = (operation, result)
        if len(self._results) > self.MAX:
            self._results.popitem(last=False)


def _copy(result: ExecutionResult) -> ExecutionResult:
    """Each subscriber's own result (its errors list is masked per connection)."""
    errors = None if result.errors is None else list(result.errors)
    return ExecutionResult(result.data, errors, result.extensions)


async def _copy_when_done(future: asyncio.Future[Any]) -> ExecutionResult:
    # A subscriber that leaves does not cancel the execution the others wait on.
    return _copy(await asyncio.shield(future))


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class Executor(StrawberryGraphQLCoreExecutionContext):
    """Each subscription event executed once for the subscribers that ask alike
    (`SharedEvents`), and sub-fields collected once per subscription, not once per event.

    graphql-core memoizes the sub-fields it collects under an object field by the identity
    of the list of that field's nodes, and a subscription's per-event executors share the
    memo. But it collects every event's root fields anew, into new lists: no event found an
    earlier one's entry, and each added its own, kept as long as the subscription lasted
    (two an event for `jobStatusChanged { job { … } }`: a subscriber that saw a million
    changes held two million), and every event paid for collecting them again (221 us of
    server CPU per delivery of that selection, 160 us without). Keyed by the field nodes
    themselves, which every event of an operation shares, the memo holds one entry per
    selection and is found every time.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Shared with the per-event executors, which are shallow copies of this one.
        self._by_nodes: dict[tuple[GraphQLObjectType, tuple[int, ...]], CollectedFields] = {}
        self._variables_key: bytes | None = None
        self._shared: SharedEvents | None = None
        if self.operation.operation is OperationType.SUBSCRIPTION:
            self._shared = getattr(getattr(self.schema, "_strawberry_schema", None), "events", None)
            try:
                self._variables_key = orjson.dumps(
                    self.variable_values.coerced, option=orjson.OPT_SORT_KEYS
                )
            except TypeError:  # a value orjson cannot write: this subscription shares nothing
                self._shared = None

    def execute_operation(self, serially: bool | None = None) -> Any:
        """A subscription event's result, computed once for every subscriber that would
        compute the same (`SharedEvents`); anything else as graphql-core executes it."""
        shared, event = self._shared, self.root_value
        actor = getattr(self.context_value, "actor", None)
        if shared is None or actor is None or not isinstance(event, JobEvent):
            return super().execute_operation(serially)
        assert self._variables_key is not None
        key = (id(self.operation), self._variables_key, actor, event.event_id)
        found = shared.get(key, self.operation)
        if isinstance(found, ExecutionResult):
            return _copy(found)
        if found is not None:
            return _copy_when_done(found)
        result = super().execute_operation(serially)
        if isinstance(result, ExecutionResult):
            shared.put(key, self.operation, result)
            return _copy(result)
        if not self.is_awaitable(result):  # incremental delivery: subscriptions have none
            return result
        future = asyncio.ensure_future(result)
        future.add_done_callback(_retrieve)
        shared.put(key, self.operation, future)
        return _copy_when_done(future)

    def collect_subfields(
        self, return_type: GraphQLObjectType, field_details_list: FieldDetailsList
    ) -> CollectedFields:
        if any(d.defer_usage or d.fragment_variable_values for d in field_details_list):
            return super().collect_subfields(return_type, field_details_list)
        # The nodes belong to the operation's document, which outlives this memo: their ids
        # are not reused meanwhile.
        key = (return_type, tuple(id(d.node) for d in field_details_list))
        collected = self._by_nodes.get(key)
        if collected is None:
            collected = self._by_nodes[key] = super().collect_subfields(
                return_type, field_details_list
            )
        return collected
