"""EnqueueJobInput is built straight from graphql-core's coerced value; it must come out
exactly as strawberry's generic conversion would build it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from queuelog.api.resolvers.context import Context
from queuelog.api.schema import build_schema
from queuelog.api.types.jobs import EnqueueJobInput
from queuelog.service.models import Actor, EnqueueRequest, Role

ENQUEUE = "mutation($i: EnqueueJobInput!) { enqueueJob(input: $i) { created } }"
INPUTS: list[dict[str, Any]] = [
    {"type": "email"},
    {
        "type": "email",
        "payload": None,
        "priority": None,
        "maxRetries": None,
        "idempotencyKey": None,
        "runAt": None,
        "delaySeconds": None,
    },
    {
        "type": "pdf",
        "payload": {"a": [1, {"b": None}]},
        "priority": "HIGH",
        "maxRetries": 5,
        "idempotencyKey": "k-1",
        "runAt": "2030-01-01T00:00:00Z",
        "delaySeconds": 7,
    },
]


class Capture:
    def __init__(self) -> None:
        self.requests: list[EnqueueRequest] = []

    async def enqueue(self, actor: Actor, request: EnqueueRequest) -> Any:
        self.requests.append(request)
        raise RuntimeError("captured")  # masked; the request is all this test needs


def built(variables: dict[str, Any]) -> EnqueueRequest:
    service = Capture()
    context = Context(
        request=None,  # type: ignore[arg-type]
        response=None,
        service=service,  # type: ignore[arg-type]
        keys=None,  # type: ignore[arg-type]
        feed=None,  # type: ignore[arg-type]
        actor=Actor("producer", Role.PRODUCER),
    )
    asyncio.run(build_schema().execute(ENQUEUE, {"i": variables}, context_value=context))
    (request,) = service.requests
    return request


@pytest.mark.parametrize("variables", INPUTS)
def test_enqueue_input_is_built_as_strawberry_would(
    variables: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = built(variables)
    definition = EnqueueJobInput.__strawberry_definition__  # type: ignore[attr-defined]
    monkeypatch.setattr(definition, "from_input", None)
    assert fast == built(variables)
