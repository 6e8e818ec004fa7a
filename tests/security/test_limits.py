"""Query limits, attacked over HTTP: each refused before execution with QUERY_TOO_COMPLEX
naming the limit; and the validation cache still hits with the limits installed."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from queuelog.api.schema import build_schema
from queuelog.config import Settings
from tests.security.http import GRAPHQL_RESPONSE, send
from tests.support import ADMIN_SECRET, LiveServer

JOB_FIELDS = (
    "id type payload priority status retryCount maxRetries idempotencyKey producer runAt "
    "claimedAt workerId leaseExpiresAt error result createdAt updatedAt finishedAt"
)
ENQUEUE = 'enqueueJob(input: {type: "%s", payload: {n: %d}}) { job { id } }'


def refused(response: httpx.Response, limit: str) -> dict[str, Any]:
    assert response.status_code == 200, response.text  # application/json: 200, no data
    body = response.json()
    assert "data" not in body, body
    [error] = [e for e in body["errors"] if e["extensions"].get("limit") == limit]
    assert error["extensions"]["code"] == "QUERY_TOO_COMPLEX", error
    return dict(error)


def jobs_of(server: LiveServer, job_type: str) -> int:
    data = server.gql(
        "query($t: String!) { jobs(type: $t) { totalCount } }", {"t": job_type}, ADMIN_SECRET
    )
    return int(data["jobs"]["totalCount"])


def test_depth_bomb_is_refused(edge: LiveServer) -> None:
    bomb = "{ jobs { nodes { " + "events { job { " * 10 + "id" + " } }" * 10 + " } } }"
    error = refused(edge.post(bomb, key=ADMIN_SECRET), "maxDepth")
    assert "QUEUELOG_MAX_DEPTH" in error["message"] and error["extensions"]["max"] == 10
    # ten levels pass
    ok = "{ jobs(first: 1) { nodes { events(first: 1) { job { events(first: 1) { job { "
    ok += "events(first: 1) { job { id } } } } } } } } }"
    assert "errors" not in edge.post(ok, key=ADMIN_SECRET).json()


def test_depth_through_fragments_is_counted(edge: LiveServer) -> None:
    query = (
        "{ jobs { nodes { ...A } } } fragment A on Job { events { job { ...B } } } "
        "fragment B on Job { events { job { ...C } } } fragment C on Job { events { job { "
        "events { job { events { job { id } } } } } } }"
    )
    refused(edge.post(query, key=ADMIN_SECRET), "maxDepth")


def test_alias_flood_is_refused_before_execution(edge: LiveServer, job_type: str) -> None:
    flood = "mutation { " + " ".join(f"a{i}: " + ENQUEUE % (job_type, i) for i in range(16)) + " }"
    error = refused(edge.post(flood, key=ADMIN_SECRET), "maxAliases")
    assert error["extensions"] == {
        "code": "QUERY_TOO_COMPLEX",
        "limit": "maxAliases",
        "actual": 16,
        "max": 15,
    }
    assert jobs_of(edge, job_type) == 0  # nothing ran


def test_token_flood_is_refused(edge: LiveServer) -> None:
    flood = "{ " + "__typename " * 2_100 + "}"
    error = refused(edge.post(flood), "maxTokens")
    assert "QUEUELOG_MAX_TOKENS" in error["message"]


def test_directive_flood_is_refused(edge: LiveServer) -> None:
    flood = "{ " + " ".join("a: __typename @include(if: true)" for _ in range(51)) + " }"
    refused(edge.post(flood), "maxDirectives")


def test_a_full_page_passes_the_cost_limit(edge: LiveServer) -> None:
    page = f"{{ jobs(first: 100) {{ edges {{ cursor node {{ {JOB_FIELDS} events {{ status }} }} }} "
    page += "pageInfo { hasNextPage endCursor } totalCount } }"
    body = edge.post(page, key=ADMIN_SECRET).json()
    assert "errors" not in body, body


def test_nested_fan_out_is_refused(edge: LiveServer) -> None:
    fan = "{ jobs(first: 100) { nodes { events { job { events { status } } } } } }"
    error = refused(edge.post(fan, key=ADMIN_SECRET), "maxCost")
    assert error["extensions"]["actual"] > error["extensions"]["max"] == 20_000


def test_aliased_fan_out_is_refused(edge: LiveServer) -> None:
    page = "jobs(first: 100) { nodes { id events { status } } }"
    refused(edge.post(f"{{ a: {page} b: {page} }}", key=ADMIN_SECRET), "maxCost")


def test_sizes_given_by_variables_cost_the_largest_page(edge: LiveServer) -> None:
    fan = "query($n: Int) { a: jobs(first: $n) { nodes { events(first: $n) { status } } } "
    fan += "b: jobs(first: $n) { nodes { events(first: $n) { status } } } }"
    refused(edge.post(fan, {"n": 1}, key=ADMIN_SECRET), "maxCost")


def test_fragment_cycle_is_refused(edge: LiveServer) -> None:
    cycle = "{ ...A } fragment A on Query { jobs { nodes { ...B } } } "
    cycle += "fragment B on Job { events { job { ...C } } } fragment C on Job { ...B }"
    response = send(edge, cycle, key=ADMIN_SECRET, headers={"Accept": GRAPHQL_RESPONSE})
    assert response.status_code == 400
    codes = {e["extensions"]["code"] for e in response.json()["errors"]}
    assert "GRAPHQL_VALIDATION_FAILED" in codes
    assert any("within itself" in e["message"] for e in response.json()["errors"])


def test_deeply_nested_document_is_refused_cleanly(edge: LiveServer) -> None:
    deep = "{ jobs(first: " + "[" * 900 + "]" * 900 + ") { totalCount } }"
    response = edge.post(deep, key=ADMIN_SECRET)
    assert response.status_code == 200
    [error] = response.json()["errors"]
    assert error["extensions"]["code"] in ("GRAPHQL_PARSE_FAILED", "QUERY_TOO_COMPLEX")


def test_introspection_query_of_graphiql_passes(edge: LiveServer) -> None:
    from graphql import get_introspection_query

    body = edge.post(get_introspection_query(descriptions=True)).json()
    assert "errors" not in body and body["data"]["__schema"]["queryType"]["name"] == "Query"


def test_introspection_cycles_are_refused(edge: LiveServer) -> None:
    bomb = "{ __schema { types { fields { type { fields { type { fields { type { fields "
    bomb += "{ name } } } } } } } } } }"
    body = edge.post(bomb).json()
    assert body["errors"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"
    assert "introspection" in body["errors"][0]["message"].lower()


def test_limits_are_configurable(locked: LiveServer) -> None:
    error = refused(
        locked.post("{ viewer { __typename } jobs { nodes { events { status } } } }"), "maxDepth"
    )
    assert error["extensions"]["max"] == 3


def test_validation_cache_hits_with_the_limits_installed(settings: Settings) -> None:
    """The rules are built once: executing one document 50 times validates it once."""
    from strawberry.extensions.validation_cache import _get_validate_cache

    schema = build_schema(settings)
    cache = _get_validate_cache(1024)
    query = "query CacheProbe { __typename viewerProbe: __typename }"
    before = cache.cache_info()

    async def run() -> None:
        for _ in range(50):
            result = await schema.execute(query)
            assert result.errors is None

    asyncio.run(run())
    after = cache.cache_info()
    assert after.misses - before.misses == 1
    assert after.hits - before.hits == 49
