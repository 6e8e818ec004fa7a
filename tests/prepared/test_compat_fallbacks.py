"""The fallbacks of `compat` for what the generic path reads: if a strawberry release moves
the graphql-core schema it built, one built from the SDL stands in, and the query limits
refuse and accept the same documents."""

from __future__ import annotations

import logging

import pytest

from queuelog.api.extension import parse_document, validate_document
from queuelog.api.schema import build_schema
from queuelog.config import Settings
from queuelog.fences.graphql_core import graphql_schema

DOCUMENTS = [
    "{ viewer { name role } }",
    "{ jobs(first: 5) { edges { node { id status payload } } } }",
    "{ viewer { nope } }",
    "{ a: viewer { name } b: viewer { name } c: viewer { name } d: viewer { name } "
    "e: viewer { name } f: viewer { name } g: viewer { name } h: viewer { name } }",
    "{ jobs(first: 100) { edges { node { events(first: 100) { job { id } } } } } }",
    "mutation { nothing }",
]


class _Moved:
    """A strawberry schema as a release might have it: its SDL, but no `_schema`."""

    def __init__(self, sdl: str) -> None:
        self.sdl = sdl

    def as_str(self) -> str:
        return self.sdl


def _codes(schema: object, limits: object, query: str) -> list[str]:
    errors = validate_document(schema, parse_document(query, 2000), limits)  # type: ignore[arg-type]
    return [f"{(e.extensions or {}).get('code')}: {e.message}" for e in errors]


def test_a_schema_built_from_the_sdl_stands_in_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    schema = build_schema(Settings(max_aliases=5, max_cost=2000))
    real = graphql_schema(schema)
    moved = _Moved(schema.as_str())
    with caplog.at_level(logging.WARNING, "queuelog.fastpath"):
        stand_in = graphql_schema(moved)  # type: ignore[arg-type]
        assert graphql_schema(moved) is stand_in  # type: ignore[arg-type]
    assert stand_in is not real
    assert len(caplog.records) == 1 and "Schema._schema" in caplog.records[0].message
    outcomes = [_codes(real, schema.limits, q) for q in DOCUMENTS]
    assert [_codes(stand_in, schema.limits, q) for q in DOCUMENTS] == outcomes
    assert outcomes[0] == [] and outcomes[1] == []
    assert all(outcome != [] for outcome in outcomes[2:])
