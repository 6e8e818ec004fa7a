"""Every operation on `schedules` (SQLAlchemy Core)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Row

from queuelog.storage.tables import schedules
from queuelog.storage.tx import Tx

S = schedules.c


def get(tx: Tx, name: str) -> Row[Any] | None:
    return tx.conn.execute(sa.select(schedules).where(S.name == name)).first()


def all_by_name(tx: Tx) -> list[Row[Any]]:
    return list(tx.conn.execute(sa.select(schedules).order_by(S.name)).all())


def put(tx: Tx, values: Mapping[str, Any]) -> Row[Any]:
    """Create the schedule `values["name"]`, or replace its definition (its last run and
    creation time are kept)."""
    kept = {k: v for k, v in values.items() if k not in ("name", "created_at")}
    updated = tx.conn.execute(
        schedules.update().where(S.name == values["name"]).values(kept).returning(*S)
    ).first()
    if updated is not None:
        return updated
    return tx.conn.execute(schedules.insert().values(values).returning(*S)).one()


def add_missing(tx: Tx, values: Mapping[str, Any]) -> bool:
    """Create the schedule unless one of that name exists (which is kept as it is)."""
    if get(tx, values["name"]) is not None:
        return False
    tx.conn.execute(schedules.insert().values(values))
    return True


def delete(tx: Tx, name: str) -> bool:
    return tx.conn.execute(schedules.delete().where(S.name == name)).rowcount > 0


def due(tx: Tx, now: datetime) -> list[Row[Any]]:
    """Schedules not paused whose next due time has come."""
    stmt = sa.select(schedules).where(S.paused.is_(False), S.next_run_at <= now)
    return list(tx.conn.execute(stmt.order_by(S.next_run_at)).all())


def advance(
    tx: Tx, name: str, expected: datetime, ran_at: datetime, job_id: int | None, next_at: datetime
) -> bool:
    """Record the run at `ran_at` and move on to `next_at`, if no other replica has moved
    the schedule on from `expected` meanwhile."""
    stmt = (
        schedules.update()
        .where(S.name == name, S.next_run_at == expected)
        .values(last_run_at=ran_at, last_job_id=job_id, next_run_at=next_at)
    )
    return tx.conn.execute(stmt).rowcount > 0
