"""An operation past the execution timeout answers alike."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from queuelog.service.jobs import JobService
from tests.prepared.documents import ENQUEUE, JOB
from tests.prepared.harness import JSON, Run, differential


async def _forever(*args: Any, **kwargs: Any) -> Any:
    # Far past the test's execution timeout; a path without the deadline answers after it
    # (not as EXECUTION_TIMEOUT) rather than hanging.
    await asyncio.sleep(10)


async def timeout_script(run: Run) -> None:
    with run.patched(JobService, "get", _forever):
        await run.post("slow query", JOB, {"id": "1"}, key="admin")
        await run.post("slow query, as JSON", JOB, {"id": "1"}, key="admin", accept=JSON)
        await run.post("slow query, aliased", "{ j: job(id: 1) { id } __typename }", key="admin")
    with run.patched(JobService, "enqueue", _forever):
        await run.post("slow mutation", ENQUEUE, {"input": {"type": "email"}}, key="producer")
    with run.patched(JobService, "claim", _forever):
        await run.post(
            "slow second mutation field",
            'mutation { a: revokeApiKey(name: "x") b: claimJob { job { id } } }',
            key="admin",
        )


async def test_execution_timeout_answers_alike(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped, _ = await differential(
        timeout_script, backend, tmp_path, monkeypatch, execution_timeout_seconds=0.01
    )
    for exchange in shipped.exchanges:
        assert exchange.status == 503, exchange.name
        assert exchange.body["errors"][0]["extensions"] == {"code": "EXECUTION_TIMEOUT"}
