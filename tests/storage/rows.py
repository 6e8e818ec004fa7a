"""Rows and calls the storage conformance suite shares: a pending job's values, and inserts,
claims and counts through `Database.write_sync` / `read_sync`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from queuelog.storage import events as events_sql
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database
from queuelog.storage.tables import job_events, jobs
from queuelog.storage.tx import Tx

T0 = datetime(2026, 1, 1, tzinfo=UTC)
J = jobs.c


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def job(**kw: Any) -> dict[str, Any]:
    """The values of a pending `jobs` row; keyword arguments override them."""
    values: dict[str, Any] = {
        "type": "email",
        "payload": "{}",
        "priority": 0,
        "status": "pending",
        "retry_count": 0,
        "max_retries": 3,
        "idempotency_key": None,
        "request_hash": None,
        "producer": "p1",
        "run_at": T0,
        "created_at": T0,
        "updated_at": T0,
        "finished_at": None,
    }
    values.update(kw)
    return values


def insert(db: Database, *rows: dict[str, Any]) -> list[int]:
    return [r.id for r in db.write_sync(jobs_sql.insert, list(rows))]


def claim(
    db: Database,
    *,
    types: tuple[str, ...] = ("email", "pdf", "sync"),
    limit: int = 100,
    now: datetime = T0,
    worker: str = "w1",
    lease: dict[str, datetime] | None = None,
) -> list[Any]:
    until = lease or {t: now + timedelta(seconds=60) for t in types}
    return db.write_sync(
        lambda tx: jobs_sql.claim(
            tx, worker=worker, now=now, types=types, limit=limit, lease_until=until
        )
    )


def table_counts(db: Database) -> tuple[int, int]:
    def count(tx: Tx) -> tuple[int, int]:
        n_jobs = tx.conn.execute(sa.select(sa.func.count()).select_from(jobs)).scalar_one()
        n_events = tx.conn.execute(sa.select(sa.func.count()).select_from(job_events)).scalar_one()
        return int(n_jobs), int(n_events)

    return db.read_sync(count)


def events_of(db: Database, job_id: int) -> list[tuple[str | None, str]]:
    rows = db.read_sync(events_sql.for_job, job_id, 100)
    return [(e.previous_status, e.status) for e in rows]
