"""Errors: anything unexpected is masked, carries the request id, and is logged in full;
API key secrets are shown once and never again."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.security.conftest import start
from tests.security.http import send
from tests.support import ADMIN_SECRET, LiveServer, key_refused

LEAKS = re.compile(r"Traceback|File \"|sqlalchemy|sqlite|psycopg|SELECT|job_events|/work/|ql_test")


@pytest.fixture
def broken(backend: str, tmp_path: Path) -> Iterator[LiveServer]:
    """A server whose database lost a table under it."""
    yield from start(tmp_path, backend)


def _drop_events_table(url: str) -> None:
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            conn.execute("DROP TABLE job_events")
    else:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP TABLE job_events CASCADE")


def test_unexpected_errors_are_masked_and_logged(broken: LiveServer) -> None:
    broken.gql('mutation { enqueueJob(input: {type: "email"}) { job { id } } }', key=ADMIN_SECRET)
    _drop_events_table(broken.db_url)
    response = send(broken, "{ jobs { nodes { id events { status } } } }", key=ADMIN_SECRET)
    assert response.status_code == 200
    body = response.json()
    assert body["errors"], body
    for error in body["errors"]:
        assert error["message"] == "Internal server error"
        assert error["extensions"] == {
            "code": "INTERNAL_SERVER_ERROR",
            "requestId": response.headers["x-request-id"],
        }
    assert not LEAKS.search(response.text), response.text
    log = broken.log()
    assert response.headers["x-request-id"] in log and "job_events" in log


def test_secrets_are_shown_once_and_never_listed(server: LiveServer) -> None:
    name = server.unique_name("once")
    created = server.gql(
        """mutation($n: String!) { createApiKey(input: {name: $n, role: PRODUCER}) {
             secret apiKey { name } } }""",
        {"n": name},
        ADMIN_SECRET,
    )["createApiKey"]
    secret = created["secret"]
    assert secret.startswith("qlk_") and len(secret) == 53
    listed = send(
        server,
        "{ apiKeys { name role allowedTypes maxPriority createdAt revokedAt } }",
        key=ADMIN_SECRET,
    )
    assert secret not in listed.text and name in listed.text
    fields = server.gql('{ __type(name: "ApiKey") { fields { name } } }')["__type"]["fields"]
    assert {f["name"] for f in fields} == {
        "name",
        "role",
        "allowedTypes",
        "maxPriority",
        "createdAt",
        "revokedAt",
    }
    for probe in ("secret", "secretHash", "hash"):
        refused = send(server, f"{{ apiKeys {{ {probe} }} }}", key=ADMIN_SECRET).json()
        assert refused["errors"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"
    # revoking takes effect at once
    assert (
        server.gql("mutation($n: String!) { revokeApiKey(name: $n) }", {"n": name}, ADMIN_SECRET)[
            "revokeApiKey"
        ]
        is True
    )
    assert key_refused(send(server, "{ viewer { name } }", key=secret))
