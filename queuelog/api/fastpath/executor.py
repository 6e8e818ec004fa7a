"""The graphql-core executor for what is not prepared: subscription events above all, whose
results subscribers that ask alike share (`SharedEvents`)."""

from __future__ import annotations

import asyncio
import collections
import weakref
from dataclasses import dataclass
from typing import Any

import orjson
from graphql import ExecutionResult, GraphQLObjectType, OperationDefinitionNode, OperationType

from queuelog.api.types.jobs import JobEvent
from queuelog.fences.graphql_core import (
    CollectedFields,
    FieldDetailsList,
    StrawberryGraphQLCoreExecutionContext,
    strawberry_schema_of,
)

# Who computes the same result for an event: the operation (by identity: the document is
# parsed once and shared), its variables, and the actor.
Group = tuple[int, bytes, Any]
# One event's result for one group.
EventKey = tuple[int, bytes, Any, int]


@dataclass(slots=True)
class _Entry:
    operation: OperationDefinitionNode
    result: ExecutionResult | asyncio.Future[Any]
    size: int
    taken: int = 1  # by the subscriber that computed it


def _size(result: ExecutionResult) -> int | None:
    """The bytes `result` holds, as its JSON; None when it cannot be written."""
    try:
        return len(orjson.dumps(result.data)) + 64 * len(result.errors or ())
    except TypeError:
        return None


class SharedEvents:
    """Results of subscription events, shared by the subscribers that would compute the same
    one: the same operation and variables, for the same actor, of the same event. A change
    fanned out to a thousand frontends that ask alike is executed once, not a thousand times.

    A result is kept only while a subscriber of its group has yet to take it: once each has
    (or the group's last subscriber left), it is released. What is kept is bounded in bytes
    (the results' JSON): past `max_bytes` the oldest go, and their subscribers compute their
    own."""

    def __init__(self, max_bytes: int = 8 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._results: collections.OrderedDict[EventKey, _Entry] = collections.OrderedDict()
        self._subscribers: dict[Group, int] = {}

    def __len__(self) -> int:
        return len(self._results)

    def join(self, group: Group) -> None:
        self._subscribers[group] = self._subscribers.get(group, 0) + 1

    def leave(self, group: Group) -> None:
        left = self._subscribers.get(group, 0) - 1
        if left > 0:
            self._subscribers[group] = left
            return
        self._subscribers.pop(group, None)
        for key in [k for k in self._results if k[:3] == group]:
            self._drop(key)

    def get(
        self, key: EventKey, operation: OperationDefinitionNode
    ) -> ExecutionResult | asyncio.Future[Any] | None:
        entry = self._results.get(key)
        # Kept with its operation, whose id therefore cannot be another's meanwhile.
        if entry is None or entry.operation is not operation:
            return None
        entry.taken += 1
        if entry.taken >= self._subscribers.get(key[:3], 0):
            self._drop(key)  # every subscriber of the group has it
        return entry.result

    def put(
        self,
        key: EventKey,
        operation: OperationDefinitionNode,
        result: ExecutionResult | asyncio.Future[Any],
    ) -> None:
        if self._subscribers.get(key[:3], 0) < 2:
            return  # nobody else will ask
        if isinstance(result, ExecutionResult):
            size = _size(result)
            if size is None or size > self.max_bytes:
                return
        else:
            size = 0  # counted when it is done
            result.add_done_callback(lambda done: self._sized(key, done))
        self._drop(key)
        self._results[key] = _Entry(operation, result, size)
        self.bytes += size
        self._trim()

    def _sized(self, key: EventKey, done: asyncio.Future[Any]) -> None:
        entry = self._results.get(key)
        if entry is None or entry.result is not done:
            return
        size = None if done.cancelled() or done.exception() else _size(done.result())
        if size is None:
            self._drop(key)
            return
        entry.size = size
        self.bytes += size
        self._trim()

    def _drop(self, key: EventKey) -> None:
        entry = self._results.pop(key, None)
        if entry is not None:
            self.bytes -= entry.size

    def _trim(self) -> None:
        while self.bytes > self.max_bytes and self._results:
            self._drop(next(iter(self._results)))


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
    of the list of that field's nodes, but collects every event's root fields anew, into new
    lists, so its memo would never be found and would grow by each event for as long as the
    subscription lasts. Keyed by the field nodes themselves, which every event of an
    operation shares, the memo holds one entry per selection and is found every time.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Shared with the per-event executors, which are shallow copies of this one.
        self._by_nodes: dict[tuple[GraphQLObjectType, tuple[int, ...]], CollectedFields] = {}
        self._group: Group | None = None
        self._shared: SharedEvents | None = None
        actor = getattr(self.context_value, "actor", None)
        if self.operation.operation is OperationType.SUBSCRIPTION and actor is not None:
            owner = strawberry_schema_of(self.schema)
            shared = getattr(getattr(owner, "fast_path", None), "events", None)
            try:
                variables = orjson.dumps(self.variable_values.coerced, option=orjson.OPT_SORT_KEYS)
            except TypeError:  # a value orjson cannot write: this subscription shares nothing
                shared = None
            if isinstance(shared, SharedEvents):
                self._shared = shared
                self._group = (id(self.operation), variables, actor)
                shared.join(self._group)
                weakref.finalize(self, shared.leave, self._group)

    def execute_operation(self, serially: bool | None = None) -> Any:
        """A subscription event's result, computed once for every subscriber that would
        compute the same (`SharedEvents`); anything else as graphql-core executes it."""
        shared, group, event = self._shared, self._group, self.root_value
        if shared is None or group is None or not isinstance(event, JobEvent):
            return super().execute_operation(serially)
        key = (*group, event.event_id)
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
