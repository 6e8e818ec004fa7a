"""Retention: the maintenance loop and `queuelog prune [--dry-run]` delete finished jobs past
their age, with their events, in bounded batches; queueStats stays right."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from queuelog.cli import main as cli
from queuelog.runtime import Services
from queuelog.service.models import Actor, EnqueueRequest
from queuelog.service.retention import prune
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import normalize_url
from tests.production.helpers import CANCEL, COMPLETE, FAIL, Keys, wait_for
from tests.support import ADMIN_SECRET, LiveServer

DAY = 86_400.0


def _event_count(db_url: str, ids: list[str]) -> int:
    engine = sa.create_engine(normalize_url(db_url))
    try:
        with engine.connect() as conn:
            stmt = sa.text("SELECT count(*) FROM job_events WHERE job_id IN :ids").bindparams(
                sa.bindparam("ids", expanding=True)
            )
            return int(conn.execute(stmt, {"ids": [int(i) for i in ids]}).scalar_one())
    finally:
        engine.dispose()


def _gone(keys: Keys, job_id: str) -> bool:
    return (
        keys.server.gql("query($id: ID!) { job(id: $id) { id } }", {"id": job_id}, ADMIN_SECRET)[
            "job"
        ]
        is None
    )


def _finish(keys: Keys, how: str) -> str:
    job = keys.enqueue()
    if how == "cancel":
        keys.call(CANCEL, keys.producer, id=job["id"])
        return str(job["id"])
    held = keys.claim()
    assert held is not None and held["id"] == job["id"]
    if how == "complete":
        keys.call(COMPLETE, id=job["id"], result={"ok": True})
    else:
        keys.call(FAIL, id=job["id"], error="no", retryable=False)
    return str(job["id"])


def _cli_prune(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """`queuelog prune` in this process (the command is the same; the import is not paid again)."""
    assert cli.main(["prune", *args]) == 0
    return capsys.readouterr().out


def test_maintenance_loop_and_cli_prune(
    db_url: str,
    start_server: Callable[..., LiveServer],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = start_server(
        maintenance_interval_seconds=0.2,
        prune_interval_seconds=0.3,
        retention_completed_days=1 / DAY,
    )
    keys = Keys.make(server, "t1")
    completed, cancelled, failed = (_finish(keys, h) for h in ("complete", "cancel", "fail"))
    idle = Keys.make(server, "t2")
    pending = idle.enqueue()["id"]
    assert idle.stats()["pending"] == 1
    assert keys.stats() == {
        "pending": 0,
        "running": 0,
        "completed": 1,
        "failed": 1,
        "cancelled": 1,
    }
    assert _event_count(db_url, [completed, cancelled]) == 5

    # Completed and cancelled jobs go after 1 s; failed ones are kept 30 days.
    wait_for(lambda: _gone(keys, completed) and _gone(keys, cancelled), 10)
    assert _event_count(db_url, [completed, cancelled]) == 0
    assert not _gone(keys, failed) and not _gone(keys, pending)
    assert keys.stats() == {
        "pending": 0,
        "running": 0,
        "completed": 0,
        "failed": 1,
        "cancelled": 0,
    }

    # The CLI, with a failed-job age of 1 s and batches of 2.
    more = [_finish(keys, "fail") for _ in range(4)]
    monkeypatch.setenv("QUEUELOG_DATABASE_URL", db_url)
    monkeypatch.setenv("QUEUELOG_RETENTION_FAILED_DAYS", str(1 / DAY))
    monkeypatch.setenv("QUEUELOG_PRUNE_BATCH_SIZE", "2")
    time.sleep(1.1)
    out = _cli_prune(capsys, "--dry-run")
    assert "would delete 5 failed job(s)" in out
    assert keys.stats()["failed"] == 5  # a dry run deletes nothing
    out = _cli_prune(capsys)
    assert "deleted 5 failed job(s)" in out
    assert all(_gone(keys, j) for j in [failed, *more])
    assert _event_count(db_url, [failed, *more]) == 0
    assert keys.stats() == dict.fromkeys(
        ("pending", "running", "completed", "failed", "cancelled"), 0
    )
    assert idle.stats()["pending"] == 1


async def test_prune_works_in_bounded_batches(
    services: Services, producer: Actor, worker: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = services.service
    for _ in range(7):
        await service.enqueue(producer, EnqueueRequest(type="email"))
    for job in await service.claim(worker, ["email"], 60, 7):
        await service.complete(worker, job.id, None)
    service.settings = service.settings.model_copy(
        update={"prune_batch_size": 3, "retention_completed_days": 0.0}
    )
    batches: list[int] = []
    real = jobs_sql.prune

    def spy(*args: Any) -> int:
        batches.append(real(*args))
        return batches[-1]

    monkeypatch.setattr(jobs_sql, "prune", spy)
    clock = service.clock
    service.clock = lambda: clock() + timedelta(seconds=1)
    counts = await prune(service)
    assert counts == {"completed": 7, "cancelled": 0, "failed": 0}
    assert batches[:3] == [3, 3, 1]  # one transaction per batch of at most 3
