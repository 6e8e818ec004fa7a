"""Selection shapes answer alike: aliases, merged fields, fragments, __typename, several
operations in one document, several mutation root fields, variables with defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.prepared.documents import ENQUEUE, VIEWER, seed
from tests.prepared.harness import GENERIC, JSON, Run, differential


async def shapes_script(run: Run) -> None:
    """Aliases, merged fields, fragments, __typename, several operations in one document,
    several mutation root fields."""
    post = run.post
    ids = await seed(run)
    await post("__typename alone, no key", "{ __typename }")
    await post(
        "__typename of the mutation root", "mutation { __typename t: __typename }", key="producer"
    )
    await post(
        "aliases",
        """query { me: viewer { who: name r: role t: __typename again: name } }""",
        key="worker",
    )
    await post(
        "the same field twice, merged",
        "{ viewer { name } viewer { role name } __typename }",
        key="worker",
    )
    await post(
        "the same root field twice under one alias, merged below",
        """query($id: ID!) { j: job(id: $id) { id status } j: job(id: $id) { type id
             payload } }""",
        {"id": ids[0]},
        key="admin",
    )
    await post(
        "inline fragments",
        "{ viewer { ... on Viewer { name } ... { role ... on Viewer { name allowedTypes } } } }",
        key="producer",
    )
    await post(
        "inline fragment on the root",
        "query { ... on Query { queueStats { pending } } ... { __typename } }",
        key="admin",
    )
    await post(
        "named fragment spread twice",
        """query($id: ID!) { job(id: $id) { ...F id ...F ...G } }
           fragment F on Job { id status priority }
           fragment G on Job { type ...F workerId }""",
        {"id": ids[1]},
        key="admin",
    )
    await post(
        "named fragment on the root",
        """query Q { ...Root __typename } fragment Root on Query { viewer { ...V } }
           fragment V on Viewer { name role }""",
        key="admin",
    )
    await post(
        "fragments in a connection",
        """{ jobs(first: 3) { ...Conn edges { node { ...J } } } }
           fragment Conn on JobConnection { totalCount pageInfo { ...P } nodes { ...J } }
           fragment P on PageInfo { hasNextPage endCursor }
           fragment J on Job { id type status t: __typename }""",
        key="admin",
    )
    await post(
        "__typename nested everywhere",
        """mutation($i: EnqueueJobInput!) { __typename enqueueJob(input: $i) { __typename
             job { __typename id } userErrors { __typename } } }""",
        {"i": {"type": "email"}},
        key="producer",
    )
    several = """
        query A { viewer { name } }
        query B($type: String) { queueStats(type: $type) { pending running } }
        mutation C($i: EnqueueJobInput!) { enqueueJob(input: $i) { job { ...J } } }
        fragment J on Job { id type }
    """
    await post(
        "operationName picks a query", several, {"type": "email"}, key="admin", operation_name="B"
    )
    await post("operationName picks another", several, key="admin", operation_name="A")
    await post(
        "operationName picks the mutation",
        several,
        {"i": {"type": "pdf"}},
        key="admin",
        operation_name="C",
    )
    await post("wrong operationName", several, key="admin", operation_name="Z", expect=GENERIC)
    await post("no operationName among several", several, key="admin", expect=GENERIC)
    await post("empty operationName", several, key="admin", operation_name="", expect=GENERIC)
    await post(
        "operationName of an anonymous operation",
        "{ viewer { name } }",
        key="admin",
        operation_name="A",
        expect=GENERIC,
    )
    await post(
        "operationName matching the only operation",
        "query A { viewer { name } }",
        key="admin",
        operation_name="A",
    )
    await post(
        "wrong operationName, as JSON",
        several,
        key="admin",
        operation_name="Z",
        expect=GENERIC,
        accept=JSON,
    )

    two = """mutation Two($a: EnqueueJobInput!, $b: EnqueueJobInput!) {
        first: enqueueJob(input: $a) { created job { id type priority } userErrors { code } }
        second: enqueueJob(input: $b) { created job { id type } userErrors { code field } }
    }"""
    await post(
        "two mutation root fields, serial",
        two,
        {"a": {"type": "email", "priority": "HIGH"}, "b": {"type": "pdf"}},
        key="producer",
    )
    await post(
        "two mutation root fields, the second refused",
        two,
        {"a": {"type": "email"}, "b": {"type": "sync"}},
        key="producer",
    )
    await post(
        "claim then complete in one operation",
        """mutation($types: [String!]) {
             c: claimJob(types: $types) { job { id status } }
             s: claimJobs(limit: 5, types: $types) { jobs { id } }
             done: completeJob(id: "3", result: [1]) { job { id status result } userErrors {
               code } }
           }""",
        {"types": ["email"]},
        key="worker",
    )
    stop = """mutation Stop($a: EnqueueJobInput!) {
        a: enqueueJob(input: $a) { job { id } }
        b: retryJob(id: "1") { job { id } }
        c: enqueueJob(input: $a) { job { id } }
    }"""
    await post(
        "a refused mutation root field stops the rest",
        stop,
        {"a": {"type": "email"}},
        key="producer",
    )
    await post(
        "the next id shows whether c ran", ENQUEUE, {"input": {"type": "email"}}, key="producer"
    )
    await post(
        "mutation root fields and __typename between them",
        """mutation { a: __typename x: revokeApiKey(name: "nobody") b: __typename
             y: revokeApiKey(name: "nobody") }""",
        key="admin",
    )
    await post(
        "variables with defaults",
        """query($first: Int = 2, $status: JobStatus = PENDING) {
             jobs(first: $first, status: $status) { totalCount nodes { id status } } }""",
        key="admin",
    )
    await post(
        "variables with defaults, given null",
        """query($first: Int = 2) { jobs(first: $first) { nodes { id } } }""",
        {"first": None},
        key="admin",
    )
    await post("unused variables sent", VIEWER, {"nobody": "asked"}, key="admin")
    await post(
        "extensions sent", VIEWER, body={"query": VIEWER, "extensions": {"x": 1}}, key="admin"
    )


async def test_selection_shapes_answer_alike(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped, _ = await differential(shapes_script, backend, tmp_path, monkeypatch)
    bodies = {e.name: e.body for e in shipped.exchanges}
    assert bodies["a refused mutation root field stops the rest"]["data"] is None
