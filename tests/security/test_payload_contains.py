"""payloadContains cannot be made slow enough to hold up the server, through a live server
on both backends: a filter's shape is bounded (VALIDATION_FAILED naming
filter.payloadContains, nothing changed), each stored payload's test is bounded, bulk
actions search outside the write lock, and a read still running at the request's deadline
is stopped in the database.

The baits are payloads made to be slow to search: a long array (SQLite tested every item
against every wanted one) and an array of arrays (PostgreSQL's index cannot tell it apart,
and its containment test compares array by array). Against a filter of 64 items, each
bait cost the unbounded SQLite test seconds inside the bulk action's write transaction."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from tests.api.attack import enqueued, snapshot, top_level_codes
from tests.support import ADMIN_SECRET, LiveServer

CANCEL_JOBS = """mutation($filter: JobFilter!) {
  cancelJobs(filter: $filter, limit: 1000) { count hasMore userErrors { code field } }
}"""
RETRY_JOBS = """mutation($filter: JobFilter!) {
  retryJobs(filter: $filter, limit: 1000) { count hasMore userErrors { code field } }
}"""
ENQUEUE_MANY = """mutation($inputs: [EnqueueJobInput!]!) {
  enqueueJobs(inputs: $inputs) { jobs { id } }
}"""
JOBS = """query($filter: JobFilter) { jobs(filter: $filter, first: 100) { nodes { id } } }"""
# Generous: a loaded machine is slow, and the unbounded code took far longer.
QUICK = 5.0

LONG = [1] * 30_000 + [0]  # 60 KB of JSON, under the 64 KiB payload limit
FLAT_BAIT = {"a": LONG}
NESTED_BAIT = {"a": [LONG, [2]]}
# Within every bound: each wanted item is found late in the bait's array or not at all.
FLAT_FILTER = {"a": [0] * 63 + [2]}
NESTED_FILTER = {"a": [[0] * 63 + [2]]}
# Each past one bound (the first within the 4 KiB of a filter, as before the bounds).
OVERSIZED = [
    {"a": [[0] * 2_000 + [2]]},  # 2,001 items in an array
    {"a": [0] * 65},
    {f"k{i}": i for i in range(257)},  # 257 values
    {"a": [[[[[[[[[0]]]]]]]]]},  # 9 levels below the filter's own
]


def _baits(server: LiveServer, key: str, job_type: str, n: int) -> list[str]:
    return [
        enqueued(server, key, type=job_type, payload=bait)["id"]
        for _ in range(n)
        for bait in (FLAT_BAIT, NESTED_BAIT)
    ]


def _statuses(server: LiveServer, ids: list[str]) -> set[str]:
    doc = "query($ids: [ID!]) { jobs(filter: {ids: $ids}) { nodes { status } } }"
    nodes = server.gql(doc, {"ids": ids}, ADMIN_SECRET)["jobs"]["nodes"]
    assert len(nodes) == len(ids)
    return {n["status"] for n in nodes}


def _timed(call: Callable[..., Any], *args: Any, **kw: Any) -> tuple[Any, float]:
    started = time.monotonic()
    out = call(*args, **kw)
    return out, time.monotonic() - started


def test_a_bait_filter_does_not_hold_up_other_writers(server: LiveServer, job_type: str) -> None:
    attacker = server.create_key("PRODUCER", [job_type])
    bystander = server.create_key("PRODUCER", [job_type])
    baits = _baits(server, attacker, job_type, 3)
    answers: list[Any] = []

    def attack() -> None:
        for _ in range(3):
            for wanted in (FLAT_FILTER, NESTED_FILTER):
                filter = {"types": [job_type], "payloadContains": wanted}
                try:
                    answers.append(_timed(server.gql, CANCEL_JOBS, {"filter": filter}, attacker))
                except Exception as exc:  # the test fails on it below
                    answers.append((exc, 0.0))

    thread = threading.Thread(target=attack)
    thread.start()
    waits = []
    while thread.is_alive() or not waits:
        _, took = _timed(enqueued, server, bystander, type=job_type)
        waits.append(took)
    thread.join()
    assert max(waits) < QUICK, waits
    assert len(answers) == 6
    for body, took in answers:
        (out,) = body.values()
        assert out == {"count": 0, "hasMore": False, "userErrors": []}
        assert took < QUICK, answers
    assert _statuses(server, baits) == {"PENDING"}


def test_bounded_filters_still_find_what_they_contain(server: LiveServer, job_type: str) -> None:
    flat, nested = _baits(server, ADMIN_SECRET, job_type, 1)
    for wanted, found in [
        ({"a": [0, 1]}, [flat]),
        ({"a": [[0, 1], [2]]}, [nested]),
        ({"a": [[2]]}, [nested]),
        ({"a": [2]}, []),
        (NESTED_FILTER, []),
    ]:
        filter = {"types": [job_type], "payloadContains": wanted}
        (nodes, took) = _timed(server.gql, JOBS, {"filter": filter}, ADMIN_SECRET)
        assert [n["id"] for n in nodes["jobs"]["nodes"]] == found, wanted
        assert took < QUICK


@pytest.mark.parametrize("wanted", OVERSIZED, ids=["long", "items", "values", "depth"])
def test_an_oversized_filter_is_refused_and_changes_nothing(
    server: LiveServer, job_type: str, wanted: dict[str, Any]
) -> None:
    _baits(server, ADMIN_SECRET, job_type, 1)
    enqueued(server, ADMIN_SECRET, type=job_type, payload={"a": [0, 2]})
    before = snapshot(server, job_type)
    filter = {"types": [job_type], "payloadContains": wanted}
    for doc in (CANCEL_JOBS, RETRY_JOBS):
        (out,) = server.gql(doc, {"filter": filter}, ADMIN_SECRET).values()
        assert out == {
            "count": 0,
            "hasMore": False,
            "userErrors": [{"code": "VALIDATION_FAILED", "field": ["filter", "payloadContains"]}],
        }
    body = server.post(JOBS, {"filter": filter}, ADMIN_SECRET).json()
    assert top_level_codes(body) == ["BAD_USER_INPUT"], body
    assert "payloadContains" in body["errors"][0]["message"], body
    assert snapshot(server, job_type) == before


def test_aliases_and_fragments_are_each_refused(server: LiveServer, job_type: str) -> None:
    enqueued(server, ADMIN_SECRET, type=job_type, payload={"a": [0, 2]})
    before = snapshot(server, job_type)
    doc = """mutation($f: JobFilter!) { ...Both }
    fragment Both on Mutation {
      a: cancelJobs(filter: $f) { count userErrors { code field } }
      b: cancelJobs(filter: {types: ["TYPE"], payloadContains: {a: [[ITEMS]]}}) {
        count userErrors { code field } }
    }"""
    doc = doc.replace("TYPE", job_type).replace("ITEMS", ", ".join(["0"] * 65))
    filter = {"types": [job_type], "payloadContains": {"a": [0] * 65}}
    out = server.gql(doc, {"f": filter}, ADMIN_SECRET)
    refused = {
        "count": 0,
        "userErrors": [{"code": "VALIDATION_FAILED", "field": ["filter", "payloadContains"]}],
    }
    assert out == {"a": refused, "b": refused}
    query = """query($f: JobFilter) { ...Lists }
    fragment Lists on Query { a: jobs(filter: $f) { totalCount } b: jobs { totalCount } }"""
    body = server.post(query, {"f": filter}, ADMIN_SECRET).json()
    assert "BAD_USER_INPUT" in top_level_codes(body), body
    assert snapshot(server, job_type) == before


def _statements_of(url: str, needle: str) -> int:
    """PostgreSQL sessions running a statement that holds `needle`, other than this one."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
            " AND state = 'active' AND query LIKE %s",
            [f"%{needle}%"],
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_filter_past_the_deadline_is_stopped_in_the_database(
    start_server: Callable[..., LiveServer], backend: str, db_url: str, job_type: str
) -> None:
    """Baits enough that a filtered read runs well past a short execution timeout, sent
    twice at once (as many as the test server has readers): each answers EXECUTION_TIMEOUT,
    and its read is stopped with it, so the next read is served at once and no statement of
    them is left running in PostgreSQL. Unstopped, each read ran on for seconds (PostgreSQL)
    or minutes (SQLite's unbounded test)."""
    loader = start_server(job_types=(job_type,))  # the baits go in at the usual timeout
    key = loader.create_key("PRODUCER", [job_type])
    if backend == "postgresql":  # about 0.1 s a bait
        bait, wanted, n = NESTED_BAIT, NESTED_FILTER, 100
    else:  # about 0.04 s a bait
        bait, wanted, n = FLAT_BAIT, FLAT_FILTER, 60
    for _ in range(n // 10):
        inputs = [{"type": job_type, "payload": bait}] * 10
        assert loader.gql(ENQUEUE_MANY, {"inputs": inputs}, key)["enqueueJobs"]["jobs"]
    server = start_server(execution_timeout_seconds=1.0, job_types=(job_type,))
    filter = {"types": [job_type], "payloadContains": wanted}
    answers: list[tuple[Any, float]] = []

    def search() -> None:
        answers.append(_timed(server.post, JOBS, {"filter": filter}, key))

    searches = [threading.Thread(target=search) for _ in range(2)]
    for thread in searches:
        thread.start()
    for thread in searches:
        thread.join()
    for response, took in answers:
        assert top_level_codes(response.json()) == ["EXECUTION_TIMEOUT"], response.text
        assert took < QUICK
    # The next read is served at once (tried again while the 1 s timeout cuts it short).
    end = time.monotonic() + QUICK
    while top_level_codes(server.post("{ jobs(first: 1) { nodes { id } } }", None, key).json()):
        assert time.monotonic() < end, "the readers are still busy"
    _, took = _timed(enqueued, server, key, type=job_type)
    assert took < QUICK
    if backend == "postgresql":
        end = time.monotonic() + QUICK
        while _statements_of(db_url, "@>") and time.monotonic() < end:
            time.sleep(0.05)
        assert _statements_of(db_url, "@>") == 0
