"""SQLite's payload test (`storage.filters.json_contains`): jsonb `@>`'s rules below the
top level, and a bounded amount of work per payload, past which it does not match."""

from __future__ import annotations

from typing import Any

import pytest

from queuelog.storage.filters import CONTAINS_STEPS, json_contains

PAYLOAD = {"user": {"id": 7, "plan": "pro"}, "tags": ["a", "b", 1], "flag": True, "n": 1.0}


@pytest.mark.parametrize(
    ("wanted", "found"),
    [
        ({"user": {"id": 7}}, True),
        ({"tags": ["b", "a"]}, True),
        ({"tags": [1.0]}, True),  # 1 is 1.0
        ({"n": 1}, True),
        ({"flag": 1}, False),  # true is not 1
        ({"tags": [True]}, False),
        ({"tags": "a"}, False),  # containment, not membership, below the top
        ({"tags": [["a"]]}, False),
        ({"user": {"id": 7, "plan": "free"}}, False),
        ({}, True),
    ],
)
def test_the_rules_of_jsonb_containment(wanted: dict[str, Any], found: bool) -> None:
    assert json_contains(PAYLOAD, wanted) is found


def test_arrays_of_arrays_and_objects() -> None:
    value = {"a": [[0, 1], [2, 3, 4], {"k": 1, "j": [5]}, [[6]]]}
    assert json_contains(value, {"a": [[1], [4, 2], {"j": [5]}, [[6]]]})
    assert not json_contains(value, {"a": [[1, 2]]})  # no one item holds both
    assert not json_contains(value, {"a": [{"k": True}]})


def test_a_payload_past_the_step_budget_does_not_match() -> None:
    # Each wanted pair is looked for through every pair stored: the match is the last one.
    value = {"a": [[0, 1]] * 20_000 + [[0, 2]]}
    wanted = {"a": [[0, 2]] * 8}
    assert json_contains(value, wanted, steps=10 * CONTAINS_STEPS)
    assert not json_contains(value, wanted)
