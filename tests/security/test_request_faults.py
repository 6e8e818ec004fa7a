"""Requests that once reached a crash or ran what they should not: a size literal too long
to convert, a validation rule that raises, several operations and no operationName,
`Job.events(first:)` out of bounds, and `JobEvent.job` of a job the viewer can no longer
read. Each answers a clear client error (or a masked server one) with the usual JSON body,
security headers and request id, on every transport."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest

from queuelog.api import measures
from tests.security.http import CLIENT, GRAPHQL_RESPONSE, send
from tests.security.wsops import PROTOCOLS, errors_of, first_answer
from tests.subscriptions.wsclient import claim, enqueue
from tests.support import ADMIN_SECRET, LiveServer

HUGE = "9" * 6_000  # past Python's 4,300 digits for int()
CLIENT_CODES = {"GRAPHQL_VALIDATION_FAILED", "BAD_USER_INPUT", "QUERY_TOO_COMPLEX"}


def answered_as_json(response: httpx.Response) -> dict[str, Any]:
    """A JSON body with the usual headers, and no server error."""
    assert response.status_code != 500, response.text[:300]
    assert response.headers["content-type"].startswith("application/json"), response.headers
    assert response.headers["x-content-type-options"] == "nosniff"
    assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-request-id"])
    return dict(response.json())


def codes(body: dict[str, Any]) -> set[str]:
    return {e["extensions"]["code"] for e in body["errors"]}


def get(server: LiveServer, query: str, key: str | None = None, **params: str) -> httpx.Response:
    headers = {"Accept": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return CLIENT.get(server.url, params={"query": query, **params}, headers=headers)


# -- an integer literal too long to convert --------------------------------------------------

HUGE_LITERALS = {
    "first": f"{{ jobs(first: {HUGE}) {{ totalCount }} }}",
    "nested first": f"{{ jobs {{ nodes {{ events(first: {HUGE}) {{ status }} }} }} }}",
    "fragment": f"{{ ...F }} fragment F on Query {{ jobs(first: {HUGE}) {{ totalCount }} }}",
    "negative": f"{{ jobs(first: -{HUGE}) {{ totalCount }} }}",
    "an ID": f"{{ job(id: {HUGE}) {{ id }} }}",
    "anywhere": f'mutation {{ enqueueJob(input: {{type: "email", maxRetries: {HUGE}}}) '
    "{ job { id } } }",
}


@pytest.mark.parametrize("shape", HUGE_LITERALS)
@pytest.mark.parametrize("key", [None, ADMIN_SECRET], ids=["no key", "key"])
def test_a_huge_integer_literal_is_a_client_error_over_http(
    edge: LiveServer, shape: str, key: str | None
) -> None:
    query = HUGE_LITERALS[shape]
    for response in (send(edge, query, key=key), get(edge, query, key)):
        # (a mutation over GET: the literal is refused before the method would be)
        body = answered_as_json(response)
        assert "data" not in body and codes(body) <= CLIENT_CODES, body
        assert "GRAPHQL_VALIDATION_FAILED" in codes(body)
        said_cleanly(body["errors"])


def said_cleanly(errors: list[dict[str, Any]]) -> None:
    """The refusal of a huge literal names its length, quotes none of it, and says nothing
    of Python."""
    text = str(errors)
    assert "9" * 100 not in text, text[:300]
    assert "int_max_str_digits" not in text and "Exceeds the limit" not in text, text[:300]
    assert any("integer literal of 6000 digits" in e["message"] for e in errors), errors


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_huge_integer_literal_is_a_client_error_over_websocket(
    edge: LiveServer, protocol: str
) -> None:
    query = (
        f"subscription {{ jobStatusChanged {{ job {{ events(first: {HUGE}) {{ status }} }} }} }}"
    )
    message = asyncio.run(first_answer(edge, ADMIN_SECRET, query, protocol))
    assert message["type"] == "error", message
    errors = errors_of(message)
    assert {e["extensions"]["code"] for e in errors} == {"GRAPHQL_VALIDATION_FAILED"}, errors
    said_cleanly(errors)


# -- a validation rule that raises ------------------------------------------------------------


async def test_a_rule_that_raises_is_a_masked_server_error(
    live: tuple[LiveServer, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, secret = live

    def broken(*_args: Any) -> Any:
        raise RuntimeError("a fault in a rule")

    monkeypatch.setattr(measures, "_cost", broken)
    auth = {"Authorization": f"Bearer {secret}", "Accept": "application/json"}
    async with httpx.AsyncClient(timeout=30) as client:
        for n, response in enumerate(
            [
                await client.post(server.url, json={"query": "{ a: __typename }"}, headers=auth),
                await client.get(server.url, params={"query": "{ b: __typename }"}, headers=auth),
            ]
        ):
            assert response.status_code == 500, (n, response.text)
            assert response.headers["content-type"].startswith("application/json")
            [error] = response.json()["errors"]
            assert error["message"] == "Internal server error"
            assert error["extensions"] == {
                "code": "INTERNAL_SERVER_ERROR",
                "requestId": response.headers["x-request-id"],
            }
            assert "fault in a rule" not in response.text
    message = await first_answer(server, secret, "{ c: __typename }", "graphql-transport-ws")
    assert [e["extensions"]["code"] for e in errors_of(message)] == ["INTERNAL_SERVER_ERROR"]


# -- several operations, no operationName ------------------------------------------------------

TWO_MUTATIONS = (
    'mutation A { enqueueJob(input: {type: "%s"}) { job { id } } } '
    'mutation B { enqueueJob(input: {type: "%s", maxRetries: 1}) { job { id } } }'
)
TWO_QUERIES = "query A { viewer { name } } query B { __typename }"


def refused_for_its_operation_name(body: dict[str, Any]) -> None:
    assert "data" not in body, body
    [error] = body["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT", error
    assert "operation name" in error["message"]


def test_several_operations_need_an_operation_name_over_http(
    edge: LiveServer, job_type: str
) -> None:
    mutations = TWO_MUTATIONS % (job_type, job_type)
    for _ in range(2):  # the second time, the prepared path has seen the document
        refused_for_its_operation_name(answered_as_json(send(edge, mutations, key=ADMIN_SECRET)))
    refused_for_its_operation_name(answered_as_json(get(edge, TWO_QUERIES, ADMIN_SECRET)))
    strict = send(edge, TWO_QUERIES, key=ADMIN_SECRET, headers={"Accept": GRAPHQL_RESPONSE})
    assert strict.status_code == 400
    count = "query($t: String) { jobs(type: $t) { totalCount } }"
    assert edge.gql(count, {"t": job_type}, ADMIN_SECRET)["jobs"]["totalCount"] == 0
    # naming one runs that one
    named = CLIENT.post(
        edge.url,
        json={"query": mutations, "operationName": "B"},
        headers={"Authorization": f"Bearer {ADMIN_SECRET}"},
    ).json()
    assert named["data"]["enqueueJob"]["job"]["id"], named
    by_get = answered_as_json(get(edge, TWO_QUERIES, ADMIN_SECRET, operationName="B"))
    assert by_get == {"data": {"__typename": "Query"}}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_several_operations_need_an_operation_name_over_websocket(
    edge: LiveServer, protocol: str
) -> None:
    two = "subscription A { jobStatusChanged { cursor } } "
    two += "subscription B { jobStatusChanged { status } }"
    message = asyncio.run(first_answer(edge, ADMIN_SECRET, two, protocol))
    assert message["type"] == "error", message
    [error] = errors_of(message)
    assert error["extensions"]["code"] == "BAD_USER_INPUT" and "operation name" in error["message"]


# -- an operationName that names no operation ------------------------------------------------

NAMED = "query A { viewer { name } } query B { __typename }"
UNNAMED = "{ __typename }"


def refused_for_an_unknown_name(errors: list[dict[str, Any]], name: str) -> None:
    [error] = errors
    assert error["extensions"] == {"code": "BAD_USER_INPUT", "field": ["operationName"]}, error
    assert error["message"] == f'Unknown operation named "{name}".'


@pytest.mark.parametrize("name", ["Nope", ""])
def test_an_unknown_operation_name_is_bad_user_input_over_http(edge: LiveServer, name: str) -> None:
    for query in (NAMED, UNNAMED):
        for response in (
            CLIENT.post(
                edge.url,
                json={"query": query, "operationName": name},
                headers={"Authorization": f"Bearer {ADMIN_SECRET}"},
            ),
            get(edge, query, ADMIN_SECRET, operationName=name),
        ):
            body = answered_as_json(response)
            assert "data" not in body, body
            refused_for_an_unknown_name(body["errors"], name)


@pytest.mark.parametrize("name", ["Nope", ""])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_unknown_operation_name_is_bad_user_input_over_websocket(
    edge: LiveServer, protocol: str, name: str
) -> None:
    """Once a server error with a traceback logged for every message."""
    logged = len(edge.log())
    for query in (NAMED, UNNAMED, "subscription S { jobStatusChanged { cursor } }"):
        message = asyncio.run(
            first_answer(edge, ADMIN_SECRET, query, protocol, operation_name=name)
        )
        assert message["type"] == "error", message
        refused_for_an_unknown_name(errors_of(message), name)
    # the right name still runs
    message = asyncio.run(first_answer(edge, ADMIN_SECRET, NAMED, protocol, operation_name="B"))
    assert message["payload"] == {"data": {"__typename": "Query"}}, message
    assert "Traceback" not in edge.log()[logged:]


# -- Job.events(first:) -----------------------------------------------------------------------


@pytest.mark.parametrize("first", [0, -1, 1001])
def test_job_events_first_out_of_bounds_is_bad_user_input(
    server: LiveServer, job_type: str, first: int
) -> None:
    job_id, _ = enqueue(server, server.admin_key, job_type)
    query = "query($id: ID!, $n: Int) { job(id: $id) { id events(first: $n) { status } } }"
    body = send(server, query, {"id": job_id, "n": first}, key=server.admin_key).json()
    [error] = body["errors"]
    assert error["extensions"] == {"code": "BAD_USER_INPUT", "field": ["first"]}, error
    assert error["message"] == "first must be between 1 and 1000"
    ok = send(server, query, {"id": job_id, "n": 1000}, key=server.admin_key).json()
    assert ok["data"]["job"]["events"] == [{"status": "PENDING"}]


# -- JobEvent.job of a job the viewer can no longer read --------------------------------------


def test_an_event_of_a_job_another_worker_now_holds_is_not_a_server_error(
    server: LiveServer, job_type: str
) -> None:
    first = server.create_key("WORKER", [job_type])
    second = server.create_key("WORKER", [job_type])
    job_id, created = enqueue(server, server.admin_key, job_type)
    assert claim(server, first, job_type) == job_id
    failed = server.gql(
        'mutation($id: ID!) { failJob(id: $id, error: "x", retryable: false) { job { status } } }',
        {"id": job_id},
        first,
    )
    assert failed["failJob"]["job"]["status"] == "FAILED"
    server.gql(
        "mutation($id: ID!) { retryJob(id: $id) { job { id } } }", {"id": job_id}, ADMIN_SECRET
    )
    assert claim(server, second, job_type) == job_id
    # The first worker replays the events it was shown: the job is the second's now.
    events = "subscription($id: ID, $after: String) { "
    events += "jobStatusChanged(jobId: $id, after: $after) { status job { id status } } }"

    async def replay() -> list[dict[str, Any]]:
        from tests.subscriptions.wsclient import ws

        async with ws(server, first) as conn:
            await conn.subscribe({"id": job_id, "after": created}, events)
            return [await conn.receive() for _ in range(2)]  # its claim, its failure

    for message in asyncio.run(replay()):
        assert message["type"] == "next", message  # the subscription goes on
        assert message["payload"]["data"] is None
        [error] = message["payload"]["errors"]
        assert error["extensions"]["code"] == "NOT_FOUND", error
        assert error["path"] == ["jobStatusChanged", "job"]
