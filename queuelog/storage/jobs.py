"""Every SQL statement on `jobs`. Each transition is a compare-and-set on the expected status."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Row

from queuelog.storage import events as events_sql
from queuelog.storage.db import Tx
from queuelog.storage.tables import PENDING, RUNNING, UTCDateTime, job_events, jobs

J = jobs.c
ALL = tuple(J)
STATUSES = ("pending", "running", "completed", "failed", "cancelled")

# Rows come back in input order. SQLAlchemy cannot sort a multi-row INSERT's RETURNING by
# parameter order on SQLite and would insert row by row; SQLite gives rowids ascending in
# VALUES order, so there the rows are sorted by id instead: one statement on both.
_INSERT = {
    "postgresql": jobs.insert().returning(*ALL, sort_by_parameter_order=True),
    "sqlite": jobs.insert().returning(*ALL),
}
_IDEMPOTENT_INSERT = {
    "sqlite": sqlite.insert(jobs)
    .on_conflict_do_nothing(index_elements=[J.producer, J.idempotency_key])
    .returning(*ALL),
    "postgresql": postgresql.insert(jobs)
    .on_conflict_do_nothing(index_elements=[J.producer, J.idempotency_key])
    .returning(*ALL),
}
_BY_ID = sa.select(*ALL).where(J.id == sa.bindparam("id"))
_BY_KEY = sa.select(*ALL).where(
    J.producer == sa.bindparam("producer"), J.idempotency_key == sa.bindparam("key")
)
_CLAIM_ORDER = (J.priority.desc(), J.run_at, J.id)
# The claim must read the partial index ix_jobs_claim. A partial index serves only a query
# whose WHERE names its literal (`status = 'pending'`, not a bound parameter: PostgreSQL's
# generic plans then fall back to ix_jobs_status_type and a sort). SQLite's planner, without
# statistics, prefers the equality index ix_jobs_status_type and sorts every pending job of
# the types asked for; INDEXED BY holds it to the claim index (SQLAlchemy renders no hints
# on SQLite, hence the text).
_IS_PENDING = J.status == sa.literal_column(f"'{PENDING}'")
_SQLITE_PICK = (
    sa.text(
        "SELECT id FROM jobs INDEXED BY ix_jobs_claim"
        f" WHERE status = '{PENDING}' AND run_at <= :now AND type IN :types"
        " ORDER BY priority DESC, run_at, id LIMIT :limit"
    )
    .bindparams(
        sa.bindparam("now", type_=UTCDateTime),
        sa.bindparam("types", expanding=True),
        sa.bindparam("limit"),
    )
    .columns(J.id)
)


def insert(tx: Tx, values: Sequence[Mapping[str, Any]]) -> list[Row[Any]]:
    """Insert jobs (none with an idempotency key), in order, recording their creation."""
    rows = list(tx.conn.execute(_INSERT[tx.dialect], list(values)).all())
    if tx.dialect == "sqlite":
        rows.sort(key=lambda r: r.id)
    for row in rows:
        tx.record(row, None)
    return rows


def insert_idempotent(tx: Tx, values: Mapping[str, Any]) -> tuple[Row[Any], bool]:
    """Insert a job with an idempotency key, or return the producer's job that holds it."""
    row = tx.conn.execute(_IDEMPOTENT_INSERT[tx.dialect], values).first()
    if row is not None:
        tx.record(row, None)
        return row, True
    existing = tx.conn.execute(
        _BY_KEY, {"producer": values["producer"], "key": values["idempotency_key"]}
    ).one()
    return existing, False


def insert_idempotent_many(
    tx: Tx, values: Sequence[Mapping[str, Any]]
) -> list[tuple[Row[Any], bool]]:
    """Insert one producer's jobs that carry idempotency keys with one INSERT (and at most
    one SELECT for the keys already taken); for each input, in order, the job holding its key
    and whether this call created it. A key repeated within `values` is created once."""
    producer = values[0]["producer"]
    assert all(v["producer"] == producer for v in values)
    created = {
        r.idempotency_key: r
        for r in tx.conn.execute(_IDEMPOTENT_INSERT[tx.dialect], list(values)).all()
    }
    taken = [v["idempotency_key"] for v in values if v["idempotency_key"] not in created]
    existing = {}
    if taken:
        stmt = sa.select(*ALL).where(J.producer == producer, J.idempotency_key.in_(taken))
        existing = {r.idempotency_key: r for r in tx.conn.execute(stmt).all()}
    out = []
    for v in values:
        row = created.pop(v["idempotency_key"], None)
        if row is not None:
            tx.record(row, None)
            existing[row.idempotency_key] = row  # a later repeat in this batch finds it
            out.append((row, True))
        else:
            out.append((existing[v["idempotency_key"]], False))
    return out


def by_key(tx: Tx, producer: str, key: str) -> Row[Any] | None:
    return tx.conn.execute(_BY_KEY, {"producer": producer, "key": key}).first()


def get(tx: Tx, job_id: int) -> Row[Any] | None:
    return tx.conn.execute(_BY_ID, {"id": job_id}).first()


def claim(
    tx: Tx,
    *,
    worker: str,
    now: datetime,
    types: Sequence[str],
    limit: int,
    lease_until: Mapping[str, datetime],
) -> list[Row[Any]]:
    """Claim up to `limit` claimable jobs of `types` in one statement, most urgent first."""
    leases = set(lease_until.values())
    lease: sa.ColumnElement[Any]
    if len(leases) == 1:
        lease = sa.literal(next(iter(leases)), UTCDateTime)
    else:
        lease = sa.case(
            {t: sa.literal(v, UTCDateTime) for t, v in lease_until.items()}, value=J.type
        )
    values = {
        "status": RUNNING,
        "worker_id": worker,
        "claimed_at": sa.bindparam("now"),
        "updated_at": sa.bindparam("now"),
        "lease_expires_at": lease,
    }
    params: dict[str, Any] = {"now": now}
    if tx.dialect == "postgresql":
        chosen = (
            sa.select(J.id)
            .where(_IS_PENDING, J.run_at <= sa.bindparam("now"), J.type.in_(types))
            .order_by(*_CLAIM_ORDER)
            .limit(limit)
            .with_for_update(skip_locked=True)
            .cte("chosen")
        )
        stmt = (
            jobs.update()
            .where(J.id == chosen.c.id, J.status == PENDING)
            .values(values)
            .returning(*ALL)
        )
    else:
        stmt = jobs.update().where(J.id.in_(_SQLITE_PICK)).values(values).returning(*ALL)
        params.update(types=list(types), limit=limit)
    rows = list(tx.conn.execute(stmt, params).all())
    rows.sort(key=lambda r: (-r.priority, r.run_at, r.id))
    for row in rows:
        tx.record(row, PENDING)
    return rows


def transition(
    tx: Tx,
    job_id: int,
    expected: str | Sequence[str],
    values: Mapping[str, Any],
    *,
    worker: str | None = None,
    lease_live_at: datetime | None = None,
) -> Row[Any] | None:
    """Compare-and-set: apply `values` only if the job is still in `expected` (and held by
    `worker` with a lease live at `lease_live_at`). Returns the changed row, or None."""
    before = (expected,) if isinstance(expected, str) else tuple(expected)
    cond: list[sa.ColumnElement[bool]] = [J.id == job_id, J.status.in_(before)]
    if worker is not None:
        cond.append(J.worker_id == worker)
    if lease_live_at is not None:
        cond.append(J.lease_expires_at > lease_live_at)
    if len(before) == 1:
        row = tx.conn.execute(jobs.update().where(*cond).values(values).returning(*ALL)).first()
        previous = before[0]
    else:
        # Several statuses allowed: read the one we replace under the write lock.
        old = tx.conn.execute(
            sa.select(J.status).where(*cond).with_for_update()
            if tx.dialect == "postgresql"
            else sa.select(J.status).where(*cond)
        ).first()
        if old is None:
            return None
        previous = old.status
        row = tx.conn.execute(
            jobs.update().where(J.id == job_id, J.status == previous).values(values).returning(*ALL)
        ).first()
    if row is not None and row.status != previous:
        tx.record(row, previous)
    return row


def expired_leases(tx: Tx, now: datetime, limit: int) -> list[Row[Any]]:
    """Running jobs whose lease ended before `now` (locked, on PostgreSQL, so that one
    replica rescues each job once)."""
    stmt = (
        sa.select(*ALL)
        .where(J.status == RUNNING, J.lease_expires_at < now)
        .order_by(J.lease_expires_at)
        .limit(limit)
    )
    if tx.dialect == "postgresql":
        stmt = stmt.with_for_update(skip_locked=True)
    return list(tx.conn.execute(stmt).all())


def held_before(tx: Tx, job_id: int, worker: str) -> bool:
    """Whether `worker` ever claimed the job (its history says so)."""
    E = job_events.c
    stmt = (
        sa.select(E.id)
        .where(E.job_id == job_id, E.status == RUNNING, E.worker_id == worker)
        .limit(1)
    )
    return tx.conn.execute(stmt).first() is not None


def _visible(producer: str | None, worker: str | None) -> list[sa.ColumnElement[bool]]:
    cond: list[sa.ColumnElement[bool]] = []
    if producer is not None:
        cond.append(J.producer == producer)
    if worker is not None:
        cond.append(J.worker_id == worker)
    return cond


def page(
    tx: Tx,
    *,
    producer: str | None,
    worker: str | None,
    status: str | None,
    job_type: str | None,
    first: int,
    before_id: int | None,
) -> tuple[list[Row[Any]], bool, int]:
    """Newest first: up to `first` jobs with id below `before_id`, whether more follow, and
    the total that match the filter."""
    cond = _visible(producer, worker)
    if status is not None:
        cond.append(J.status == status)
    if job_type is not None:
        cond.append(J.type == job_type)
    total = tx.conn.execute(sa.select(sa.func.count()).select_from(jobs).where(*cond)).scalar_one()
    if before_id is not None:
        cond.append(J.id < before_id)
    rows = list(
        tx.conn.execute(sa.select(*ALL).where(*cond).order_by(J.id.desc()).limit(first + 1)).all()
    )
    return rows[:first], len(rows) > first, total


def counts(
    tx: Tx, *, producer: str | None, worker: str | None, job_type: str | None
) -> dict[str, int]:
    cond = _visible(producer, worker)
    if job_type is not None:
        cond.append(J.type == job_type)
    stmt = sa.select(J.status, sa.func.count()).where(*cond).group_by(J.status)
    found = {status: int(n) for status, n in tx.conn.execute(stmt).all()}
    return {s: found.get(s, 0) for s in STATUSES}


def prune(tx: Tx, status: str, finished_before: datetime, limit: int) -> int:
    """Delete up to `limit` jobs of `status` finished before `finished_before`, with their
    events; returns how many."""
    ids = list(
        tx.conn.execute(
            sa.select(J.id)
            .where(J.status == status, J.finished_at < finished_before)
            .order_by(J.finished_at)
            .limit(limit)
        ).scalars()
    )
    if not ids:
        return 0
    events_sql.note_pruned(tx, ids)  # subscriptions resuming from below it must hear so
    # Re-check the status: a job retried since the select stays.
    gone = list(
        tx.conn.execute(
            jobs.delete().where(J.id.in_(ids), J.status == status).returning(J.id)
        ).scalars()
    )
    if gone:  # ON DELETE CASCADE does this too; say it for connections without FKs
        tx.conn.execute(job_events.delete().where(job_events.c.job_id.in_(gone)))
    return len(gone)


def count_prunable(tx: Tx, status: str, finished_before: datetime) -> int:
    stmt = sa.select(sa.func.count()).where(J.status == status, J.finished_at < finished_before)
    return int(tx.conn.execute(stmt).scalar_one())
