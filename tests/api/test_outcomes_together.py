"""A worker's outcomes of several jobs in one document share one transaction when the
operation is prepared, and answer as when run one after the other (the generic path, or
when two of them name the same job). Real HTTP against a server in the test's process, on
both backends."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from queuelog.config import Settings
from queuelog.runtime import Services
from tests.support import LiveServer

N = 6


@pytest.fixture(params=[True, False], ids=["prepared", "generic"])
def settings(db_url: str, request: pytest.FixtureRequest) -> Settings:
    return Settings(
        database_url=db_url, job_types=("email", "pdf", "sync"), prepared_operations=request.param
    )


def outcomes(ids: list[str]) -> str:
    fields = " ".join(
        f'a{i}: completeJob(id: "{job_id}", result: {i}) {{ job {{ id status result }} '
        "userErrors { code } }"
        for i, job_id in enumerate(ids)
    )
    return f"mutation {{ {fields} }}"


async def post(server: LiveServer, key: str, query: str) -> dict[str, Any]:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http:
        body = (await http.post(server.url, json={"query": query})).json()
    assert "errors" not in body, body
    return dict(body["data"])


async def test_outcomes_of_different_jobs_share_a_transaction(
    live: tuple[LiveServer, str], services: Services, settings: Settings
) -> None:
    server, key = live
    enqueue = " ".join(
        f'e{i}: enqueueJob(input: {{type: "email"}}) {{ job {{ id }} }}' for i in range(N)
    )
    await post(server, key, f"mutation {{ {enqueue} }}")
    claimed = await post(server, key, f"mutation {{ claimJobs(limit: {N}) {{ jobs {{ id }} }} }}")
    ids = [j["id"] for j in claimed["claimJobs"]["jobs"]]
    commits = 0
    lock = threading.Lock()

    def committed() -> None:
        nonlocal commits
        with lock:
            commits += 1

    services.db.on_commit(committed)
    data = await post(server, key, outcomes(ids))
    assert [data[f"a{i}"] for i in range(N)] == [
        {"job": {"id": job_id, "status": "COMPLETED", "result": i}, "userErrors": []}
        for i, job_id in enumerate(ids)
    ]
    if settings.prepared_operations:
        assert commits <= 2  # the writer may start on the first before the rest are queued
    else:
        assert commits == N
    # Again, as a worker whose answer was lost would: each answers as the first time.
    assert await post(server, key, outcomes(ids)) == data
    # The same job twice in one document runs in order: the second is a repeat.
    twice = await post(server, key, outcomes([ids[0], ids[0]]).replace("result: 1", "result: 0"))
    assert twice["a0"] == twice["a1"] == data["a0"]
