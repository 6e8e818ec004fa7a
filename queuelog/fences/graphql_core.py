"""Every name of strawberry-graphql or graphql-core outside their public API that queuelog
uses is imported or read here, and nowhere else, beside the versions it was tested with.

Two kinds:
- what the fast path needs (`FAST_PATH_MISSING` says why it cannot have it): when an import
  fails, or the installed versions are not in `TESTED`, the server serves everything
  through strawberry's generic path instead (`queuelog.api.fastpath.load`);
- what the generic path reads, each with a fallback that keeps it working if a release
  moves it.

A new release of either library: run the tests (they run the API with the path on and
off, and `tests/prepared` holds the two paths to the same answers), then widen `TESTED`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any

import strawberry
from graphql import GraphQLSchema, build_schema

log = logging.getLogger("queuelog.fastpath")

__all__ = [
    "MAX_NESTING_DEPTH",
    "TESTED",
    "CollectedFields",
    "FieldDetailsList",
    "InvalidOperationTypeError",
    "StrawberryGraphQLCoreExecutionContext",
    "VariableValueSource",
    "ast_from_value",
    "build_input_with",
    "coerce_default_value",
    "complete_leaf_value",
    "get_variable_signature",
    "graphql_schema",
    "strawberry_schema_of",
]

# The releases the fast path is tested with, by distribution (`make test-newest`).
TESTED: Mapping[str, str] = {
    "strawberry-graphql": ">=0.341.2,<0.342",
    "graphql-core": ">=3.3.2,<3.4",
}


# -- what the fast path needs ----------------------------------------------------------------

FAST_PATH_MISSING: str | None = None
try:
    from graphql.execution import Executor as _GraphQLExecutor
    from graphql.execution.collect_fields import CollectedFields, FieldDetailsList
    from graphql.execution.get_variable_signature import get_variable_signature
    from graphql.execution.values import VariableValueSource
    from graphql.language.parser import MAX_NESTING_DEPTH
    from graphql.utilities.coerce_input_value import coerce_default_value
    from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

    # graphql-core's completion of a scalar or enum value, its errors included.
    complete_leaf_value = _GraphQLExecutor.complete_leaf_value
except (ImportError, AttributeError) as exc:  # a release moved one of them
    FAST_PATH_MISSING = f"{type(exc).__name__}: {exc}"


def strawberry_schema_of(schema: GraphQLSchema) -> Any:
    """The strawberry Schema a graphql-core schema was built by (None if unknown)."""
    return getattr(schema, "_strawberry_schema", None)


def build_input_with(cls: type, build: Callable[[type, Mapping[str, Any], Any], Any]) -> bool:
    """Have strawberry build the input type `cls` from graphql-core's coerced value with
    `build(cls, value, input_context)` rather than field by field. False when this
    strawberry has no such hook (the generic conversion then stays)."""
    definition = getattr(cls, "__strawberry_definition__", None)
    if definition is None or not hasattr(definition, "from_input"):
        return False
    definition.from_input = build
    return True


# -- what the generic path reads, with fallbacks -----------------------------------------------


def graphql_schema(schema: strawberry.Schema) -> GraphQLSchema:
    """The graphql-core schema strawberry built (strawberry has no public accessor). If a
    release moves it, one built from the schema's SDL (`as_str`, public) stands in: it
    validates documents alike, but its custom scalars accept any literal until execution."""
    built = getattr(schema, "_schema", None)
    if isinstance(built, GraphQLSchema):
        return built
    return _schema_from_sdl(schema)


@functools.lru_cache(maxsize=16)
def _schema_from_sdl(schema: strawberry.Schema) -> GraphQLSchema:
    log.warning(
        "strawberry's graphql-core schema is not where it was (Schema._schema): the query "
        "limits validate against one built from the SDL instead"
    )
    return build_schema(schema.as_str())


def _no_literal(value: Any, type_: Any) -> Any:
    return None


# A default value as the literal strawberry prints in the SDL (None: no literal).
ast_from_value: Callable[[Any, Any], Any] = _no_literal
with contextlib.suppress(ImportError):  # a release moved it: such defaults stay as they are
    from strawberry.printer import ast_from_value as _printer

    ast_from_value = _printer.ast_from_value


try:
    from strawberry.schema.exceptions import InvalidOperationTypeError
except ImportError:  # pragma: no cover - a release moved it: GET mutations then answer 400

    class InvalidOperationTypeError(Exception):  # type: ignore[no-redef]
        """Never raised: stands in for strawberry's when it cannot be imported."""
