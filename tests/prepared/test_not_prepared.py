"""What the prepared path leaves to the generic one answers alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.prepared.documents import seed
from tests.prepared.harness import GENERIC, JSON, Run, differential


async def not_prepared_script(run: Run) -> None:
    """What the prepared path leaves to the generic one, and must still answer right."""
    post = run.post
    ids = await seed(run)
    await post(
        "introspection",
        "{ __schema { queryType { name } mutationType { name } } }",
        key="admin",
        expect=GENERIC,
    )
    await post("introspection without a key", "{ __schema { queryType { name } } }", expect=GENERIC)
    await post(
        "__type",
        '{ __type(name: "Job") { name kind fields { name } } }',
        key="admin",
        expect=GENERIC,
    )
    await post(
        "introspection beside a field",
        "{ __schema { queryType { name } } viewer { name } }",
        key="admin",
        expect=GENERIC,
    )
    await post(
        "@include",
        "query($x: Boolean!) { viewer { name @include(if: $x) role } }",
        {"x": False},
        key="admin",
        expect=GENERIC,
    )
    await post(
        "@skip on a root field",
        "{ viewer @skip(if: true) { name } __typename }",
        key="admin",
        expect=GENERIC,
    )
    await post(
        "@include on a fragment spread",
        "{ viewer { ...V @include(if: true) } } fragment V on Viewer { name }",
        key="admin",
        expect=GENERIC,
    )
    await post(
        "@skip on an inline fragment",
        "{ viewer { ... @skip(if: false) { name } role } }",
        key="admin",
        expect=GENERIC,
    )
    await post(
        "@skip with bad variables",
        "query($x: Boolean!) { viewer @skip(if: $x) { name } }",
        {"x": "yes"},
        key="admin",
        expect=GENERIC,
    )
    await post(
        "job events",
        "query($id: ID!) { job(id: $id) { id events { status } } }",
        {"id": ids[0]},
        key="admin",
        expect=GENERIC,
    )
    await post(
        "job events with an argument",
        "query($id: ID!) { job(id: $id) { events(first: 1) { cursor previousStatus "
        "status job { id status } } } }",
        {"id": ids[0]},
        key="producer",
        expect=GENERIC,
    )
    await post(
        "job events in a mutation payload",
        "mutation($id: ID!) { heartbeatJob(id: $id) { job { events { status } } } }",
        {"id": ids[0]},
        key="worker",
        expect=GENERIC,
    )
    await post(
        "events in a fragment",
        "{ jobs(first: 1) { nodes { ...E } } } fragment E on Job { events { status } }",
        key="admin",
        expect=GENERIC,
    )
    await post(
        "two resolved root fields in a query",
        "{ viewer { name } queueStats { pending } }",
        key="admin",
        expect=GENERIC,
    )
    await post(
        "two resolved root fields in a query, one failing",
        "{ viewer { name } apiKeys { name } }",
        key="producer",
        expect=GENERIC,
    )
    await post(
        "the same root field under two aliases",
        "{ a: job(id: 1) { id } b: job(id: 2) { id } }",
        key="admin",
        expect=GENERIC,
    )
    await post(
        "subscription over POST",
        "subscription { jobStatusChanged { cursor status } }",
        key="admin",
        expect=GENERIC,
    )
    await post(
        "subscription over POST, as JSON",
        "subscription { jobStatusChanged { cursor status } }",
        key="admin",
        expect=GENERIC,
        accept=JSON,
    )
    await post(
        "a document that is not a string",
        "",
        body={"query": 5},
        key="admin",
        expect=GENERIC,
        document=False,
    )
    await post("no query", "", body={"variables": {}}, key="admin", expect=GENERIC, document=False)


async def test_not_prepared_operations_answer_alike(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await differential(not_prepared_script, backend, tmp_path, monkeypatch)
