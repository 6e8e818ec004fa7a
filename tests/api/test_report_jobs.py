"""reportJobs: a worker's outcomes of several jobs in one call, committed in one transaction,
each judged on its own as completeJob or failJob would judge it. Real HTTP against a server
in the test's process, on both backends, prepared and generic."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from queuelog.config import Settings
from queuelog.runtime import Services
from queuelog.service.models import Priority, Role
from tests.storage.plans import Captured
from tests.support import LiveServer

REPORT = """
mutation($outcomes: [JobOutcomeInput!]!) {
  reportJobs(outcomes: $outcomes) {
    outcomes { job { id status result error retryCount } willRetry userErrors { code field } }
  }
}
"""


@pytest.fixture(params=[True, False], ids=["prepared", "generic"])
def settings(db_url: str, request: pytest.FixtureRequest) -> Settings:
    return Settings(
        database_url=db_url, job_types=("email", "pdf", "sync"), prepared_operations=request.param
    )


async def post(
    server: LiveServer, key: str, query: str, variables: dict[str, Any] | None = None
) -> dict[str, Any]:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http:
        body = (await http.post(server.url, json={"query": query, "variables": variables})).json()
    return dict(body)


async def data(
    server: LiveServer, key: str, query: str, variables: dict[str, Any] | None = None
) -> dict[str, Any]:
    body = await post(server, key, query, variables)
    assert "errors" not in body, body
    return dict(body["data"])


async def enqueue(server: LiveServer, key: str, n: int, max_retries: int = 3) -> list[str]:
    fields = " ".join(
        f'e{i}: enqueueJob(input: {{type: "email", maxRetries: {max_retries}}}) {{ job {{ id }} }}'
        for i in range(n)
    )
    out = await data(server, key, f"mutation {{ {fields} }}")
    return [out[f"e{i}"]["job"]["id"] for i in range(n)]


async def claim(server: LiveServer, key: str, n: int) -> list[str]:
    out = await data(server, key, f"mutation {{ claimJobs(limit: {n}) {{ jobs {{ id }} }} }}")
    return [j["id"] for j in out["claimJobs"]["jobs"]]


async def status(server: LiveServer, key: str, job_id: str) -> str:
    out = await data(server, key, f'{{ job(id: "{job_id}") {{ status }} }}')
    return str(out["job"]["status"])


class Commits:
    """Counts the commits that append events."""

    def __init__(self, services: Services) -> None:
        self.n = 0
        self._lock = threading.Lock()
        services.db.on_commit(self._committed)

    def _committed(self) -> None:
        with self._lock:
            self.n += 1


async def workers(services: Services) -> tuple[str, str]:
    _, one = await services.keys.create("w-one", Role.WORKER, None, Priority.MEDIUM)
    _, two = await services.keys.create("w-two", Role.WORKER, None, Priority.MEDIUM)
    return one, two


async def test_a_mixed_batch_is_judged_outcome_by_outcome_in_one_transaction(
    live: tuple[LiveServer, str], services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, admin = live
    one, two = await workers(services)
    ids = await enqueue(server, admin, 5)
    final = await enqueue(server, admin, 1, max_retries=0)
    held = await claim(server, one, 6)
    assert sorted(held, key=int) == sorted(ids + final, key=int)
    done_before, retry, fail_now = ids[0], ids[1], final[0]
    complete_a, complete_b = ids[2], ids[3]
    other = ids[4]
    # One job finished earlier by this worker, one given to the other worker.
    await data(server, one, f'mutation {{ completeJob(id: "{done_before}") {{ job {{ id }} }} }}')
    await data(
        server,
        one,
        f'mutation {{ failJob(id: "{other}", error: "x", retryable: false) {{ willRetry }} }}',
    )
    await data(server, admin, f'mutation {{ retryJob(id: "{other}") {{ job {{ id }} }} }}')
    not_held = (await enqueue(server, admin, 1))[0]
    commits = Commits(services)
    captured = Captured(services.db, monkeypatch)
    outcomes = [
        {"id": complete_a, "result": {"n": 1}},
        {"id": retry, "error": "try again"},
        {"id": fail_now, "error": "no retries left"},
        {"id": complete_b, "result": [2]},
        {"id": not_held},
        {"id": "999999999"},
        {"id": "not-an-id"},
        {"id": done_before},  # a repeat of a completeJob that went through
        {"id": complete_a, "result": {"n": 1}},  # the same job twice in one call
        {"id": retry, "error": "try again"},
    ]
    out = (await data(server, one, REPORT, {"outcomes": outcomes}))["reportJobs"]["outcomes"]
    assert commits.n == 1
    # One compare-and-set per kind of outcome (complete, fail and retry, fail), whatever
    # their number; the failing jobs read together, then the jobs left to judge.
    updates = [text for text, _ in captured.sent if "UPDATE jobs" in text]
    assert len(updates) == 3, captured.sent
    assert len(captured.sent) == 5, captured.sent
    assert len(out) == len(outcomes)
    assert out[0] == {
        "job": {
            "id": complete_a,
            "status": "COMPLETED",
            "result": {"n": 1},
            "error": None,
            "retryCount": 0,
        },
        "willRetry": False,
        "userErrors": [],
    }
    assert out[1]["job"]["status"] == "PENDING" and out[1]["willRetry"] is True
    assert out[1]["job"]["retryCount"] == 1  # (a worker is not shown errors)
    assert out[2]["job"]["status"] == "FAILED" and out[2]["willRetry"] is False
    assert out[2]["userErrors"] == []
    assert out[3]["job"]["status"] == "COMPLETED" and out[3]["job"]["result"] == [2]
    for refused, at in ((out[4], 4), (out[5], 5), (out[6], 6)):
        assert refused["job"] is None
        assert refused["userErrors"] == [
            {"code": "NOT_FOUND", "field": ["outcomes", str(at), "id"]}
        ]
    assert out[7]["job"]["status"] == "COMPLETED" and out[7]["userErrors"] == []
    assert out[8] == out[0]
    assert out[9] == out[1]
    assert await status(server, admin, not_held) == "PENDING"

    # The other worker's job, and a job whose claim this worker lost to it.
    taken = await claim(server, two, 5)
    assert other in taken and not_held in taken
    refused = await data(server, one, REPORT, {"outcomes": [{"id": other}, {"id": not_held}]})
    first, second = refused["reportJobs"]["outcomes"]
    assert first["userErrors"][0]["code"] == "NOT_JOB_OWNER"  # it held the job before
    assert second == {
        "job": None,
        "willRetry": False,
        "userErrors": [{"code": "NOT_FOUND", "field": ["outcomes", "1", "id"]}],
    }
    assert await status(server, admin, other) == "RUNNING"
    # An admin is told of the state of a job another worker holds.
    as_admin = await data(server, admin, REPORT, {"outcomes": [{"id": other}]})
    (answer,) = as_admin["reportJobs"]["outcomes"]
    assert answer["userErrors"][0]["code"] == "INVALID_STATE"
    assert answer["job"]["status"] == "RUNNING"


async def test_a_refused_outcome_changes_nothing_of_the_others(
    live: tuple[LiveServer, str], services: Services, settings: Settings
) -> None:
    server, admin = live
    one, _ = await workers(services)
    ids = await enqueue(server, admin, 2)
    await claim(server, one, 2)
    too_large = {"blob": "x" * (settings.payload_max_bytes + 1)}
    outcomes = [{"id": ids[0], "result": too_large}, {"id": ids[1], "result": 7}]
    out = (await data(server, one, REPORT, {"outcomes": outcomes}))["reportJobs"]["outcomes"]
    assert out[0]["job"] is None
    assert out[0]["userErrors"] == [
        {"code": "PAYLOAD_TOO_LARGE", "field": ["outcomes", "0", "result"]}
    ]
    assert out[1]["job"]["status"] == "COMPLETED"
    assert await status(server, admin, ids[0]) == "RUNNING"


async def test_more_than_100_outcomes_are_refused_whole(
    live: tuple[LiveServer, str], services: Services
) -> None:
    server, admin = live
    one, _ = await workers(services)
    ids = await enqueue(server, admin, 2)
    await claim(server, one, 2)
    outcomes = [{"id": ids[i % 2]} for i in range(101)]
    body = await post(server, one, REPORT, {"outcomes": outcomes})
    assert body["data"] is None
    (error,) = body["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["extensions"]["field"] == ["outcomes"]
    assert "1 to 100" in error["message"]
    body = await post(server, one, REPORT, {"outcomes": []})
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    for job_id in ids:
        assert await status(server, admin, job_id) == "RUNNING"


async def test_only_workers_and_admins_report(
    live: tuple[LiveServer, str], services: Services
) -> None:
    server, admin = live
    _, producer = await services.keys.create("p-one", Role.PRODUCER, None, Priority.MEDIUM)
    (job_id,) = await enqueue(server, producer, 1)
    body = await post(server, producer, REPORT, {"outcomes": [{"id": job_id}]})
    assert body["data"] is None
    assert body["errors"][0]["extensions"]["code"] == "FORBIDDEN"
    assert await status(server, admin, job_id) == "PENDING"
