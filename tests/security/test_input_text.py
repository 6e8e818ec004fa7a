"""One input rule for every string a query compares in SQL: a NUL character, which no
stored text holds and PostgreSQL cannot take, answers BAD_USER_INPUT naming the argument,
never INTERNAL_SERVER_ERROR. The subscription's replay from the table is the case that
broke; the lists and counts, aliased and through fragments, follow the same rule; and no
other string argument that reaches the database fails with a server error either."""

from __future__ import annotations

from typing import Any

import pytest

from tests.security.http import send
from tests.subscriptions.wsclient import enqueue, ws
from tests.support import ADMIN_SECRET, LiveServer

NUL_FILTERS = ["\x00", "email\x00", "\x00' OR '1'='1"]


def top_level(body: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(e["extensions"]["code"], e["extensions"].get("field")) for e in body["errors"]]


@pytest.mark.parametrize("text", NUL_FILTERS)
async def test_a_nul_in_a_subscription_filter_is_bad_input(
    server: LiveServer, job_type: str, text: str
) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    _, cursor = enqueue(server, producer, job_type)
    async with ws(server, producer) as client:
        # From a cursor (the replay reads the table), and live.
        for after in ("0", cursor, None):
            variables = {"type": text} if after is None else {"type": text, "after": after}
            op = await client.subscribe(variables)
            error = await client.error(op)
            assert error["extensions"] == {"code": "BAD_USER_INPUT", "field": ["type"]}, error
        # Inline in the document, with the filter escaped as GraphQL writes it.
        inline = 'subscription { jobStatusChanged(type: "a\\u0000", after: "0") { cursor } }'
        op = await client.subscribe({}, query=inline)
        assert (await client.error(op))["extensions"]["code"] == "BAD_USER_INPUT"
        # The connection still serves a valid subscription.
        op = await client.subscribe({"type": job_type, "after": "0"})
        assert (await client.event(op))["cursor"] == cursor


@pytest.mark.parametrize("text", NUL_FILTERS)
def test_a_nul_in_a_list_or_count_filter_is_bad_input(server: LiveServer, text: str) -> None:
    shapes = [
        "query($t: String) { jobs(type: $t) { totalCount } }",
        "query($t: String) { queueStats(type: $t) { pending } }",
        "query($t: String) { a: jobs(type: $t) { nodes { id } } b: jobs(type: $t) { totalCount } }",
        "query($t: String) { ...q } fragment q on Query { queueStats(type: $t) { running } }",
    ]
    for query in shapes:
        body = send(server, query, {"t": text}, ADMIN_SECRET).json()
        assert body.get("data") is None, body
        assert {code for code, _ in top_level(body)} == {"BAD_USER_INPUT"}, (query, body)
        assert all(field == ["type"] for _, field in top_level(body)), body


def test_no_string_argument_that_reaches_the_database_fails_with_a_server_error(
    server: LiveServer, job_type: str
) -> None:
    """Every other string argument with a NUL is refused by a rule of its own (a type that
    is not configured, a key or name that is not printable) or stored cleaned (an error
    text), before the database sees it."""
    producer = server.create_key("PRODUCER", [job_type])
    worker = server.create_key("WORKER", [job_type])
    nul = "x\x00y"
    codes = "{ userErrors { code } }"
    calls: list[tuple[str, str, dict[str, Any]]] = [
        (
            producer,
            f"mutation($t: String!) {{ enqueueJob(input: {{type: $t}}) {codes} }}",
            {"t": nul},
        ),
        (
            producer,
            "mutation($t: String!, $k: String) {"
            f" enqueueJob(input: {{type: $t, idempotencyKey: $k}}) {codes} }}",
            {"t": job_type, "k": nul},
        ),
        (worker, f"mutation($t: [String!]) {{ claimJob(types: $t) {codes} }}", {"t": [nul]}),
        (
            ADMIN_SECRET,
            f"mutation($n: String!) {{ createApiKey(input: {{name: $n, role: WORKER}}) {codes} }}",
            {"n": nul},
        ),
        (ADMIN_SECRET, "mutation($n: String!) { revokeApiKey(name: $n) }", {"n": nul}),
        (ADMIN_SECRET, "query($id: ID!) { job(id: $id) { id } }", {"id": nul}),
        (ADMIN_SECRET, "query($a: String) { jobs(after: $a) { totalCount } }", {"a": nul}),
    ]
    for key, query, variables in calls:
        body = send(server, query, variables, key).json()
        found = [e["extensions"]["code"] for e in body.get("errors", [])]
        assert "INTERNAL_SERVER_ERROR" not in found, (query, body)
    job_id, _ = enqueue(server, producer, job_type)
    claim = "mutation($t: [String!]) { claimJob(types: $t) { job { id } } }"
    assert server.gql(claim, {"t": [job_type]}, worker)["claimJob"]["job"]["id"] == job_id
    fail = """mutation($id: ID!, $e: String!) {
      failJob(id: $id, error: $e, retryable: false) { job { error } } }"""
    assert server.gql(fail, {"id": job_id, "e": f"boom{nul}"}, worker)["failJob"]["job"]
    stored = server.gql("query($id: ID!) { job(id: $id) { error } }", {"id": job_id}, ADMIN_SECRET)
    assert stored["job"]["error"] == "boomxy"
