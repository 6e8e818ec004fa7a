"""The compiled variable coercion of prepared operations (`queuelog.api.fastpath.coerce`)
against the function it stands in for, graphql-core's `get_variable_values`, value by
value."""

from __future__ import annotations

from typing import Any

import pytest
from graphql import GraphQLError, OperationDefinitionNode, parse
from graphql.execution.values import get_variable_values

from queuelog.api.fastpath.coerce import Variables
from queuelog.api.schema import build_schema

SCHEMA = build_schema()

ENQUEUE = "mutation($input: EnqueueJobInput!) { enqueueJob(input: $input) { created } }"
ENQUEUE_MANY = (
    "mutation($inputs: [EnqueueJobInput!]!) { enqueueJobs(inputs: $inputs) { jobs { id } } }"
)
CLAIM = (
    "mutation($types: [String!], $lease: Int) {"
    " claimJobs(limit: 2, types: $types, leaseSeconds: $lease) { jobs { id } } }"
)
FAIL = "mutation($id: ID!, $error: String!) { failJob(id: $id, error: $error) { willRetry } }"
STATS = "query($type: String) { queueStats(type: $type) { pending } }"

GOOD_INPUTS: list[Any] = [
    {"type": "email"},
    {"type": "email", "payload": {"to": ["a@b.c"], "n": 1.5, "deep": {"x": [None, True]}}},
    {
        "type": "pdf",
        "payload": None,
        "priority": "HIGH",
        "maxRetries": 0,
        "idempotencyKey": "k-1",
        "runAt": "2026-11-29T12:00:00+00:00",
        "delaySeconds": 5,
    },
    {"type": "sync", "priority": None, "maxRetries": None, "idempotencyKey": None},
    {"type": "sync", "payload": [1, 2, 3]},
    {"type": "sync", "payload": "text"},
]
BAD_INPUTS: list[Any] = [
    None,
    {},
    {"type": None},
    {"type": 5},
    {"type": "email", "unknown": 1},
    {"type": "email", "priority": "URGENT"},
    {"type": "email", "priority": 30},
    {"type": "email", "maxRetries": "3"},
    {"type": "email", "maxRetries": 1.5},
    {"type": "email", "maxRetries": True},
    {"type": "email", "maxRetries": 2**40},
    {"type": "email", "runAt": "yesterday"},
    {"type": "email", "runAt": 0},
    "email",
    ["email"],
    7,
]
# Values graphql-core coerces and one might not expect to: they must come out the same.
ODD_INPUTS: list[Any] = [
    {"type": "email", "maxRetries": 3.0},
    {"type": "email", "delaySeconds": -1},
]


def _operation(query: str) -> OperationDefinitionNode:
    operation = parse(query).definitions[0]
    assert isinstance(operation, OperationDefinitionNode)
    return operation


def _same_coercion(query: str, variables: dict[str, Any]) -> None:
    definitions = _operation(query).variable_definitions
    compiled = Variables(SCHEMA._schema, definitions)
    assert compiled.specs is not None, "this operation's variables must be compiled"
    ours = compiled.coerce(variables)
    theirs = get_variable_values(SCHEMA._schema, definitions, variables)
    if isinstance(theirs, list):
        assert isinstance(ours, list)
        assert [e.formatted for e in ours] == [e.formatted for e in theirs]
        return
    assert not isinstance(ours, list)
    assert ours.coerced == theirs.coerced
    assert {k: (s.signature.name, s.value) for k, s in ours.sources.items()} == {
        k: (s.signature.name, s.value) for k, s in theirs.sources.items()
    }


@pytest.mark.parametrize("value", GOOD_INPUTS + BAD_INPUTS + ODD_INPUTS)
def test_an_input_coerces_as_graphql_core_coerces_it(value: Any) -> None:
    _same_coercion(ENQUEUE, {"input": value})
    _same_coercion(ENQUEUE, {} if value is None else {"other": value})


@pytest.mark.parametrize(
    "values",
    [
        GOOD_INPUTS,
        [GOOD_INPUTS[0]],
        GOOD_INPUTS[1],  # a single value stands for a list of one
        [],
        [*GOOD_INPUTS, None],
        [*GOOD_INPUTS, BAD_INPUTS[4]],
        None,
        "email",
    ],
)
def test_a_list_of_inputs_coerces_as_graphql_core_coerces_it(values: Any) -> None:
    _same_coercion(ENQUEUE_MANY, {"inputs": values})


@pytest.mark.parametrize(
    "variables",
    [
        {},
        {"types": None, "lease": None},
        {"types": ["email", "pdf"], "lease": 30},
        {"types": "email"},
        {"types": ["email", None]},
        {"types": [1]},
        {"lease": "30"},
        {"lease": 2**31},
        {"lease": -(2**31)},
    ],
)
def test_optional_variables_coerce_as_graphql_core_coerces_them(variables: dict[str, Any]) -> None:
    _same_coercion(CLAIM, variables)


@pytest.mark.parametrize(
    "variables",
    [{"id": "12", "error": "boom"}, {"id": 12, "error": "boom"}, {"id": 1.5, "error": "x"}, {}],
)
def test_ids_and_strings_coerce_as_graphql_core_coerces_them(variables: dict[str, Any]) -> None:
    _same_coercion(FAIL, variables)


def test_a_variable_with_a_default_is_left_to_graphql_core() -> None:
    query = 'query($type: String = "email") { queueStats(type: $type) { pending } }'
    definitions = _operation(query).variable_definitions
    assert Variables(SCHEMA._schema, definitions).specs is None
    _same_coercion(STATS, {"type": "email"})


def test_errors_name_the_variable_and_the_path() -> None:
    definitions = _operation(ENQUEUE_MANY).variable_definitions
    errors = Variables(SCHEMA._schema, definitions).coerce(
        {"inputs": [{"type": "x", "maxRetries": "no"}]}
    )
    assert isinstance(errors, list) and all(isinstance(e, GraphQLError) for e in errors)
    assert "$inputs" in errors[0].message and "maxRetries" in errors[0].message
