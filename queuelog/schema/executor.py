"""The graphql-core executor strawberry runs for what is not prepared: subscriptions above
all (`schema.prepared` covers the hot queries and mutations)."""

from __future__ import annotations

from typing import Any

from graphql import GraphQLObjectType
from graphql.execution.collect_fields import CollectedFields, FieldDetailsList
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext


class Executor(StrawberryGraphQLCoreExecutionContext):
    """Sub-fields collected once per subscription, not once per event.

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
