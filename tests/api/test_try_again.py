"""A claim whose transaction the database ends for a deadlock on every try is answered as
TRY_AGAIN (a field error marked retryable), logged as one line without a traceback; never as
INTERNAL_SERVER_ERROR. The deadlock is put in the claim's storage call, under the real
`Database` and its retries. In-process server (`inprocess.live`) for its log records."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import psycopg
import pytest

from queuelog.client import AsyncClient, QueuelogError
from queuelog.runtime import Services
from queuelog.service import job_types
from queuelog.service.models import Role
from queuelog.storage import retry
from queuelog.worker.acks import transient
from tests.support import LiveServer

CLAIM = """mutation { claimJobs(types: ["email"], limit: 2) { jobs { id } userErrors { code } } }"""


async def test_a_claim_that_deadlocks_on_every_try_is_answered_try_again(
    live: tuple[LiveServer, str],
    services: Services,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, _ = live
    _, worker_key = await services.keys.create("w", Role.WORKER)
    tries: list[None] = []

    def deadlocked(*args: Any, **kwargs: Any) -> Any:
        tries.append(None)
        raise psycopg.errors.DeadlockDetected("deadlock detected")

    monkeypatch.setattr(job_types, "claim", deadlocked)
    caplog.set_level(logging.DEBUG)
    async with httpx.AsyncClient() as http:
        response = await http.post(
            server.url, json={"query": CLAIM}, headers={"Authorization": f"Bearer {worker_key}"}
        )
    body = response.json()
    (error,) = body["errors"]
    assert error["extensions"]["code"] == "TRY_AGAIN" and error["extensions"]["retryable"]
    assert "try again" in error["message"] and "40P01" in error["message"]
    assert len(tries) == retry.TRIES  # the server ran it again before it gave up
    records = [r for r in caplog.records if r.name.startswith(("queuelog", "strawberry"))]
    assert not [r for r in records if r.exc_info], "no traceback for a conflict"
    assert any(r.levelno == logging.WARNING and "40P01" in r.getMessage() for r in records)

    # The Python client and worker see an error worth trying again.
    async with AsyncClient(server.url, worker_key) as client:
        with pytest.raises(QueuelogError) as refused:
            await client.claim(2, types=["email"])
    assert refused.value.code == "TRY_AGAIN" and transient(refused.value)

    monkeypatch.undo()  # the next claim goes through
    async with AsyncClient(server.url, worker_key) as client:
        assert await client.claim(2, types=["email"]) == []
