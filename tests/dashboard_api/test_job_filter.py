"""`jobs(filter:)` through a live server, on both backends: every condition, combined with
the caller's visibility, newest first with the cursor pagination."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.api.attack import FAIL, claim, enqueued, top_level_codes
from tests.support import ADMIN_SECRET, LiveServer

JOBS = """query($filter: JobFilter, $status: JobStatus, $type: String, $first: Int,
                $after: String) {
  jobs(filter: $filter, status: $status, type: $type, first: $first, after: $after) {
    totalCount
    nodes { id }
    pageInfo { hasNextPage endCursor }
  }
}"""


def ids(server: LiveServer, key: str, filter: dict[str, Any], **args: Any) -> list[str]:
    found = server.gql(JOBS, {"filter": filter, **args}, key)["jobs"]
    assert found["totalCount"] == len(found["nodes"]), found
    return [n["id"] for n in found["nodes"]]


@pytest.fixture
def world(server: LiveServer, job_type: str, other_job_type: str) -> dict[str, Any]:
    """Jobs of two producers over two types: one running, one failed, the rest pending."""
    alice = server.create_key("PRODUCER", [job_type, other_job_type])
    bob = server.create_key("PRODUCER", [job_type])
    worker = server.create_key("WORKER", [job_type])
    start = datetime.now(UTC) - timedelta(seconds=1)
    payloads = [
        {"user": {"id": 7, "plan": "pro"}, "tags": ["a", "b"]},
        {"user": {"id": 8}, "flag": True},
        {"user": {"id": 7}, "flag": 1},
    ]
    made = [
        enqueued(server, alice, type=job_type, payload=payloads[0], idempotencyKey="k-1"),
        enqueued(server, alice, type=other_job_type, payload=payloads[1]),
        enqueued(server, bob, type=job_type, payload=payloads[2], idempotencyKey="k-1"),
    ]
    held = claim(server, worker, [job_type])["job"]  # the oldest of the type: made[0]
    assert held["id"] == made[0]["id"]
    failed = server.gql(FAIL, {"id": held["id"], "error": "x", "retryable": False}, worker)
    assert failed["failJob"]["job"]["status"] == "FAILED"
    assert claim(server, worker, [job_type])["job"]["id"] == made[2]["id"]
    return {
        "ids": [j["id"] for j in made],
        "alice": alice,
        "bob": bob,
        "worker": server.gql("{ viewer { name } }", key=worker)["viewer"]["name"],
        "start": start,
        "types": [job_type, other_job_type],
    }


def test_each_condition(server: LiveServer, world: dict[str, Any]) -> None:
    a, b, c = world["ids"]
    t1, t2 = world["types"]
    both = {"types": [t1, t2]}
    alice = server.gql("{ viewer { name } }", key=world["alice"])["viewer"]["name"]
    cases: list[tuple[dict[str, Any], list[str]]] = [
        ({}, [c, b, a]),
        ({"ids": [a, c, "nope", "99999999999"]}, [c, a]),
        ({"statuses": ["FAILED", "RUNNING"]}, [c, a]),
        ({"statuses": ["PENDING"]}, [b]),
        ({"types": [t2]}, [b]),
        ({"producer": alice}, [b, a]),
        ({"workerId": world["worker"]}, [c, a]),
        ({"idempotencyKey": "k-1"}, [c, a]),
        ({"createdAfter": world["start"].isoformat()}, [c, b, a]),
        ({"createdBefore": world["start"].isoformat()}, []),
        ({"payloadContains": {"user": {"id": 7}}}, [c, a]),
        ({"payloadContains": {"tags": ["b"]}}, [a]),
        ({"payloadContains": {"tags": "b"}}, []),  # containment, not membership, below the top
        ({"payloadContains": {"flag": True}}, [b]),  # true is not 1
        ({"payloadContains": {"flag": 1}}, [c]),
        ({"payloadContains": {"user": {"id": 7, "plan": "pro"}, "tags": []}}, [a]),
        ({"payloadContains": {}}, [c, b, a]),
        ({"statuses": ["RUNNING"], "idempotencyKey": "k-1", "producer": alice}, []),
    ]
    for condition, expected in cases:
        assert ids(server, ADMIN_SECRET, {**both, **condition}) == expected, condition


def test_filter_combines_with_status_and_type(server: LiveServer, world: dict[str, Any]) -> None:
    a, _b, c = world["ids"]
    t1, t2 = world["types"]
    filter = {"types": [t1, t2]}
    assert ids(server, ADMIN_SECRET, filter, type=t1) == [c, a]
    assert ids(server, ADMIN_SECRET, filter, status="RUNNING") == [c]
    assert ids(server, ADMIN_SECRET, {"statuses": ["PENDING"]}, type=t1) == []


def test_pages_newest_first(server: LiveServer, world: dict[str, Any]) -> None:
    a, b, c = world["ids"]
    filter = {"types": world["types"]}
    seen: list[str] = []
    after = None
    while True:
        page = server.gql(JOBS, {"filter": filter, "first": 1, "after": after}, ADMIN_SECRET)
        jobs = page["jobs"]
        assert jobs["totalCount"] == 3
        seen += [n["id"] for n in jobs["nodes"]]
        if not jobs["pageInfo"]["hasNextPage"]:
            break
        after = jobs["pageInfo"]["endCursor"]
    assert seen == [c, b, a]


CANCEL = "mutation($id: ID!) { cancelJob(id: $id) { job { status } } }"


def test_a_producers_type_pages_its_pending_and_other_jobs_in_one_order(
    server: LiveServer, job_type: str
) -> None:
    """A type of few jobs is read in two branches, its pending jobs and its others
    (`storage.job_lists`): merged, a producer's pages hold its jobs newest first, statuses
    interleaved, and none of another producer's."""
    alice = server.create_key("PRODUCER", [job_type])
    bob = server.create_key("PRODUCER", [job_type])
    mine = []
    for i in range(6):
        mine.append(enqueued(server, alice, type=job_type)["id"])
        enqueued(server, bob, type=job_type)
        if i % 2:
            cancelled = server.gql(CANCEL, {"id": mine[-1]}, alice)["cancelJob"]["job"]
            assert cancelled["status"] == "CANCELLED"
    seen: list[str] = []
    after = None
    while True:
        args = {"filter": {"types": [job_type]}, "first": 2, "after": after}
        page = server.gql(JOBS, args, alice)["jobs"]
        assert page["totalCount"] == 6
        seen += [n["id"] for n in page["nodes"]]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    assert seen == mine[::-1]
    pending = {"types": [job_type], "statuses": ["PENDING"]}
    assert ids(server, alice, pending) == mine[-2::-2]


def test_a_producer_never_reaches_another_producers_jobs(
    server: LiveServer, world: dict[str, Any]
) -> None:
    a, b, c = world["ids"]
    bob = server.gql("{ viewer { name } }", key=world["bob"])["viewer"]["name"]
    types = {"types": world["types"]}
    assert ids(server, world["alice"], types) == [b, a]
    assert ids(server, world["alice"], {**types, "producer": bob}) == []
    assert ids(server, world["alice"], {**types, "ids": [c]}) == []
    assert ids(server, world["alice"], {**types, "payloadContains": {"flag": 1}}) == []
    assert ids(server, world["bob"], {**types, "idempotencyKey": "k-1"}) == [c]
    # A viewer reads them all, as an admin does.
    viewer = server.create_key("VIEWER")
    assert ids(server, viewer, {**types, "idempotencyKey": "k-1"}) == [c, a]


@pytest.mark.parametrize(
    ("filter", "field"),
    [
        ({"payloadContains": [1]}, "payloadContains"),
        ({"ids": [str(i) for i in range(1001)]}, "ids"),
    ],
)
def test_refused_conditions(server: LiveServer, filter: dict[str, Any], field: str) -> None:
    body = server.post(JOBS, {"filter": filter}, ADMIN_SECRET).json()
    assert top_level_codes(body) == ["BAD_USER_INPUT"], body
    assert field in body["errors"][0]["message"] or field in str(body["errors"][0]), body


def test_unprintable_text_matches_nothing(server: LiveServer, job_type: str) -> None:
    enqueued(server, ADMIN_SECRET, type=job_type)
    assert ids(server, ADMIN_SECRET, {"types": [job_type], "producer": "a\x00b"}) == []
