"""Input types built straight from graphql-core's coerced value.

Each field of `EnqueueJobInput` is a scalar or an enum, which graphql-core has already
coerced (enums to their members, defaults filled in), so strawberry's generic per-field
conversion would only copy them; for the inputs of a large `enqueueJobs` that copy is most
of the request's cost. Omitted fields keep the class's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queuelog.api.types.jobs import EnqueueJobInput
from queuelog.fences.graphql_core import build_input_with


def _from_coerced_leaves(cls: type) -> None:
    definition: Any = cls.__strawberry_definition__  # type: ignore[attr-defined]
    names: list[tuple[str, str]] = []

    def build(target: type, value: Mapping[str, Any], context: Any) -> Any:
        if not names:
            convert = context.config.name_converter.from_field
            names.extend((f.python_name, convert(f)) for f in definition.fields)
        return target(**{py: value[gql] for py, gql in names if gql in value})

    build_input_with(cls, build)


def build_inputs_from_coerced_leaves() -> None:
    _from_coerced_leaves(EnqueueJobInput)
