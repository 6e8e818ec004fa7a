"""`jobs { totalCount }` costs a read of its own (a count of every matching job for a
worker, of the job counts otherwise): it runs only when the operation selects it (directly,
through a fragment, or aliased). In-process server (the `live` fixture) so that the
reader's statements can be counted while a real HTTP client asks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from queuelog.runtime import Services
from queuelog.service.models import Actor, EnqueueRequest, Role
from tests.support import LiveServer

PAGE = "{ jobs(first: 2) { nodes { id } pageInfo { hasNextPage } } }"
SELECTED = {
    "directly": "{ jobs(first: 2) { totalCount nodes { id } } }",
    "by a fragment": "{ jobs(first: 1) { ...T } } fragment T on JobConnection { totalCount }",
    "inline, aliased": "{ jobs(first: 1) { ... on JobConnection { n: totalCount } } }",
    "skipped": "{ jobs(first: 1) { totalCount @skip(if: true) nodes { id } } }",
}


@pytest.fixture
def counts(services: Services) -> Iterator[list[str]]:
    """The statements the server's readers run for a total: a count of the jobs, or (an
    admin's or a producer's) a sum of the job counts."""
    seen: list[str] = []

    def before(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if "count(" in statement.lower() or "job_counts" in statement:
            seen.append(statement)

    sa.event.listen(services.db.reader, "before_cursor_execute", before)
    yield seen
    sa.event.remove(services.db.reader, "before_cursor_execute", before)


async def _query(server: LiveServer, key: str, query: str) -> dict[str, Any]:
    async with httpx.AsyncClient() as client:
        response = await client.post(
            server.url, json={"query": query}, headers={"Authorization": f"Bearer {key}"}
        )
    body = response.json()
    assert "errors" not in body, body
    return dict(body["data"]["jobs"])


async def _three_jobs(services: Services) -> None:
    actor = Actor("producer-1", Role.PRODUCER)
    for _ in range(3):
        await services.service.enqueue(actor, EnqueueRequest(type="email"))


async def test_a_page_without_total_count_counts_nothing(
    live: tuple[LiveServer, str], services: Services, counts: list[str]
) -> None:
    server, key = live
    await _three_jobs(services)
    page = await _query(server, key, PAGE)
    assert len(page["nodes"]) == 2
    assert page["pageInfo"]["hasNextPage"] is True
    assert counts == []


@pytest.mark.parametrize("how", SELECTED)
async def test_total_count_is_counted_when_selected(
    live: tuple[LiveServer, str], services: Services, counts: list[str], how: str
) -> None:
    server, key = live
    await _three_jobs(services)
    page = await _query(server, key, SELECTED[how])
    assert len(counts) == 1
    if how != "skipped":
        assert page.get("totalCount", page.get("n")) == 3
    else:
        assert "totalCount" not in page


FILTERED = """query($filter: JobFilter, $status: JobStatus) {
  jobs(filter: $filter, status: $status, first: 1) { totalCount }
}"""


async def test_a_filter_of_statuses_types_and_producer_is_counted_from_the_job_counts(
    live: tuple[LiveServer, str], services: Services, counts: list[str]
) -> None:
    """What the job counts count by (status, type, producer) they answer, however many jobs
    match: no statement counts the jobs table. Any other condition counts the rows."""
    server, key = live
    await _three_jobs(services)
    other = Actor("producer-2", Role.PRODUCER)
    await services.service.enqueue(other, EnqueueRequest(type="pdf"))
    cases: list[tuple[dict[str, Any], str | None, int]] = [
        ({"types": ["email"]}, None, 3),
        ({"types": ["email", "pdf"], "statuses": ["PENDING"]}, None, 4),
        ({"types": ["pdf"], "producer": "producer-1"}, None, 0),
        ({"producer": "producer-1"}, "PENDING", 3),
        ({"statuses": ["FAILED"]}, "PENDING", 0),
        ({"types": []}, None, 0),
    ]
    for filter, status, expected in cases:
        variables = {"filter": filter, "status": status}
        async with httpx.AsyncClient() as client:
            response = await client.post(
                server.url,
                json={"query": FILTERED, "variables": variables},
                headers={"Authorization": f"Bearer {key}"},
            )
        assert response.json()["data"]["jobs"]["totalCount"] == expected, filter
    assert counts and not any("count(" in c.lower() for c in counts), counts
    counts.clear()
    page = await _query(
        server, key, '{ jobs(first: 1, filter: {idempotencyKey: "k"}) { totalCount } }'
    )
    assert page["totalCount"] == 0
    assert [c for c in counts if "count(" in c.lower()], counts
