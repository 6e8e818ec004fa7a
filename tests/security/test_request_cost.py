"""What one request may make the server build is bounded, whatever shape asks for it:
introspection is costed like any field, requests without a key have a lower ceiling,
large leaves (JSON values, error texts) count their bytes, and the encoded response has a
ceiling of its own (HTTP and both WebSocket protocols)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from graphql import get_introspection_query

from tests.security.conftest import DEFAULT_LIMITS, start
from tests.security.http import send
from tests.security.wsops import PROTOCOLS, errors_of, first_answer
from tests.support import ADMIN_SECRET, BACKENDS, LiveServer

SCHEMA_WALK = (
    "__schema { types { name fields { name args { name type { name kind ofType { name kind "
    "ofType { name kind } } } } type { name kind ofType { name kind } } } } }"
)
FULL_INTROSPECTION = get_introspection_query(descriptions=True)
BIG_PAYLOAD = {"blob": "x" * 60_000}


def refusal(response: httpx.Response) -> dict[str, Any]:
    """The one QUERY_TOO_COMPLEX error of a request refused before execution."""
    assert response.status_code == 200, response.text
    body = response.json()
    assert "data" not in body, str(body)[:500]
    [error] = [e for e in body["errors"] if e["extensions"]["code"] == "QUERY_TOO_COMPLEX"]
    return dict(error)


def aliased(n: int, field: str) -> str:
    return "{ " + " ".join(f"a{i}: {field}" for i in range(n)) + " }"


# -- introspection, with and without a key ------------------------------------------------


def walks(*names: str) -> str:
    return " ".join(f"{n}: {SCHEMA_WALK}" for n in names)


# Eight or more walks of the whole schema: over the ceiling for requests without a key.
INTROSPECTION_SHAPES = {
    "aliases": aliased(15, SCHEMA_WALK),
    "fragments": "{ ...A ...B ...C } "
    f"fragment A on Query {{ {walks('a', 'b', 'c')} }} "
    f"fragment B on Query {{ {walks('d', 'e', 'f')} }} "
    f"fragment C on Query {{ {walks('g', 'h')} }}",
    "inline fragments": f"{{ ... on Query {{ {walks('a', 'b', 'c', 'd')} }} "
    f"... {{ {walks('e', 'f', 'g', 'h')} }} }}",
}


@pytest.mark.parametrize("shape", INTROSPECTION_SHAPES)
def test_anonymous_introspection_is_costed(edge: LiveServer, shape: str) -> None:
    error = refusal(send(edge, INTROSPECTION_SHAPES[shape]))
    assert error["extensions"]["limit"] == "maxAnonymousCost", error
    assert "QUEUELOG_MAX_ANONYMOUS_COST" in error["message"]


def full_introspection_aliased(n: int) -> str:
    """GraphiQL's introspection query with its `__schema` asked `n` times, under aliases."""
    operation, fragments = FULL_INTROSPECTION.split("fragment FullType", 1)
    walk = operation[operation.index("{") + 1 : operation.rindex("}")].strip()
    copies = " ".join(f"a{i}: {walk}" for i in range(n))
    return f"query {{ {copies} }} fragment FullType{fragments}"


def test_keyed_introspection_is_costed_too(edge: LiveServer) -> None:
    error = refusal(send(edge, full_introspection_aliased(15), key=ADMIN_SECRET))
    assert error["extensions"]["limit"] == "maxCost", error


def test_one_introspection_without_a_key_still_passes(edge: LiveServer) -> None:
    """What GraphiQL and schema tools send before a key is typed."""
    body = send(edge, FULL_INTROSPECTION).json()
    assert "errors" not in body and body["data"]["__schema"]["queryType"]["name"] == "Query"


def test_without_a_key_the_ceiling_is_lower(edge: LiveServer) -> None:
    eight = aliased(8, SCHEMA_WALK)
    assert refusal(send(edge, eight))["extensions"]["limit"] == "maxAnonymousCost"
    assert "errors" not in send(edge, eight, key=ADMIN_SECRET).json()


# -- large leaves --------------------------------------------------------------------------

PAGE = "jobs(first: 100) { nodes { payload } }"
LARGE_LEAF_SHAPES = {
    "aliased nodes": aliased(15, PAGE),
    "aliased edges": aliased(3, "jobs(first: 100) { edges { node { result } } }"),
    "fragments": "{ ...P ...Q } fragment P on Query { a: "
    + PAGE
    + " b: "
    + PAGE
    + " } fragment Q on Query { c: jobs(first: 100) { nodes { ...J } } } "
    "fragment J on Job { payload result error }",
    "events { job }": "{ jobs(first: 10) { nodes { events(first: 30) { job { payload } } } } }",
    "claimJobs": "mutation { claimJobs(limit: 100) { jobs { payload } } "
    "b: claimJobs(limit: 100) { jobs { payload } } c: claimJobs(limit: 100) { jobs { payload } } }",
    "variables": "query($n: Int) { a: jobs(first: $n) { nodes { payload } } "
    "b: jobs(first: $n) { nodes { payload } } c: jobs(first: $n) { nodes { payload } } }",
}


@pytest.mark.parametrize("shape", LARGE_LEAF_SHAPES)
def test_large_leaves_are_costed_in_every_shape(edge: LiveServer, shape: str) -> None:
    error = refusal(send(edge, LARGE_LEAF_SHAPES[shape], {"n": 1}, key=ADMIN_SECRET))
    assert error["extensions"]["limit"] == "maxResponseBytes", error
    assert "QUEUELOG_MAX_RESPONSE_BYTES" in error["message"]


@pytest.fixture(scope="module", params=BACKENDS)
def shipped(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """The shipped limits, on each backend: on SQLite, the session's `edge` has them."""
    if request.param == "sqlite":
        yield request.getfixturevalue("edge")
        return
    tmp: Path = tmp_path_factory.mktemp(f"cost-{request.param}")
    yield from start(tmp, str(request.param), **DEFAULT_LIMITS)


def test_amplification_over_stored_payloads_is_refused(shipped: LiveServer, job_type: str) -> None:
    producer = shipped.create_key("PRODUCER", [job_type])
    enqueue = "mutation($i: EnqueueJobInput!) { enqueueJob(input: $i) { job { id } } }"
    for _ in range(5):
        shipped.gql(enqueue, {"i": {"type": job_type, "payload": BIG_PAYLOAD}}, producer)
    page = f'jobs(first: 100, type: "{job_type}") {{ nodes {{ payload }} }}'
    # one full page of its own jobs is what a producer reads
    body = send(shipped, "{ " + page + " }", key=producer).json()
    assert len(body["data"]["jobs"]["nodes"]) == 5 and "errors" not in body
    error = refusal(send(shipped, aliased(15, page), key=producer))
    assert error["extensions"]["limit"] == "maxResponseBytes"


# -- the response's own ceiling -------------------------------------------------------------

CEILING = 65_536
# A payload at the payload limit: its job alone, with the response around it, is over a
# response ceiling of the same size, though the cost rule (which counts the payload's
# limit) lets a single one through.
AT_THE_LIMIT = {"blob": "x" * (CEILING - 24)}


@pytest.fixture(scope="module")
def small_responses(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp: Path = tmp_path_factory.mktemp("small-responses")
    yield from start(tmp, "sqlite", **DEFAULT_LIMITS, max_response_bytes=CEILING)


@pytest.fixture(scope="module")
def large_job(small_responses: LiveServer) -> tuple[str, str]:
    """A job at the payload limit, and the cursor just before its creation."""
    out = small_responses.gql(
        "mutation($i: EnqueueJobInput!) { enqueueJob(input: $i) { job { id events { cursor } } } }",
        {"i": {"type": "email", "payload": AT_THE_LIMIT}},
        ADMIN_SECRET,
    )["enqueueJob"]["job"]
    return out["id"], f"{int(out['events'][0]['cursor']) - 1:016d}"


def test_a_response_over_the_ceiling_is_a_clear_error_over_http(
    small_responses: LiveServer, large_job: tuple[str, str]
) -> None:
    job = "query($id: ID!) { job(id: $id) { payload } }"
    walk = aliased(8, SCHEMA_WALK)  # no large leaf: only the encoded size can tell
    auth = {"Authorization": f"Bearer {ADMIN_SECRET}", "Accept": "application/json"}
    for response in (
        send(small_responses, job, {"id": large_job[0]}, key=ADMIN_SECRET),
        send(small_responses, walk, key=ADMIN_SECRET),
        httpx.get(small_responses.url, params={"query": walk}, headers=auth),
    ):
        error = refusal(response)
        assert error["extensions"]["limit"] == "maxResponseBytes", error
        assert error["extensions"]["actual"] > error["extensions"]["max"] == CEILING
        assert len(response.content) < 1_000 and response.headers["x-request-id"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_event_over_the_ceiling_is_a_clear_error_over_websocket(
    small_responses: LiveServer, large_job: tuple[str, str], protocol: str
) -> None:
    events = "subscription($id: ID, $after: String) { "
    events += "jobStatusChanged(jobId: $id, after: $after) { job { payload } } }"
    variables = {"id": large_job[0], "after": large_job[1]}
    message = asyncio.run(first_answer(small_responses, ADMIN_SECRET, events, protocol, variables))
    assert message["type"] in ("next", "data"), message
    [error] = errors_of(message)
    assert error["extensions"]["code"] == "QUERY_TOO_COMPLEX", error
    assert error["extensions"]["limit"] == "maxResponseBytes"
