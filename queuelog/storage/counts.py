"""`job_counts`: how many jobs there are of each type, producer and status.

Counting the jobs table costs a scan of every matching row; these counters answer the same
in a few rows. They change in the transaction that changes the
jobs, so every snapshot sees them agree: each status change appends an event, and the
statement that appends a transaction's events also applies their deltas, in one order
(on PostgreSQL into the counter shard of the writer's connection, the last locks its
transaction takes; on SQLite there is one writer); `jobs.prune` subtracts what it
deletes, in the same statement (`Tx.deltas`). The counters carry no worker: a worker's
view (the jobs it holds or last held) is still counted from the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import sqlalchemy as sa

from queuelog.storage.tables import job_counts
from queuelog.storage.tx import EventRow, Tx

C = job_counts.c
Delta = tuple[str, str, str, int]  # job type, producer, status, change in count


def deltas(events: Iterable[EventRow], more: Iterable[Delta] = ()) -> list[Delta]:
    """What `events` change (one less of each job's previous status, one more of its new),
    and the changes `more`; in one order (counter rows are locked in it), changes that
    cancel out left out."""
    change: dict[tuple[str, str, str], int] = {}
    get = change.get
    for job_type, producer, status, n in more:
        key = (job_type, producer, status)
        change[key] = get(key, 0) + n
    for _, job_type, producer, _, previous, status, _ in events:
        if previous is not None:
            key = (job_type, producer, previous)
            change[key] = get(key, 0) - 1
        key = (job_type, producer, status)
        change[key] = get(key, 0) + 1
    return [(*key, n) for key, n in sorted(change.items()) if n]


def by_status(tx: Tx, *, producer: str | None, job_type: str | None) -> dict[str, int]:
    """How many jobs of each status (only those with any), of `producer` and `job_type`
    when given."""
    stmt = sa.select(C.status, sa.func.sum(C.n)).group_by(C.status)
    if producer is not None:
        stmt = stmt.where(C.producer == producer)
    if job_type is not None:
        stmt = stmt.where(C.job_type == job_type)
    return {status: int(n) for status, n in tx.conn.execute(stmt).all()}


def total(
    tx: Tx,
    *,
    producer: str | None,
    types: Sequence[str] | None,
    statuses: Sequence[str] | None,
) -> int:
    """How many jobs match (each condition when given: of `producer`, of one of `types`,
    in one of `statuses`)."""
    stmt = sa.select(sa.func.coalesce(sa.func.sum(C.n), 0))
    if producer is not None:
        stmt = stmt.where(C.producer == producer)
    if types is not None:
        stmt = stmt.where(C.job_type.in_(types))
    if statuses is not None:
        stmt = stmt.where(C.status.in_(statuses))
    return int(tx.conn.execute(stmt).scalar_one())


def by_status_of(
    tx: Tx, types: Sequence[str], producer: str | None
) -> dict[str, tuple[int, int, int]]:
    """For each status with any job: how many jobs, how many of them of `types`, and how
    many of `producer` (all, when not given)."""
    typed = sa.case((C.job_type.in_(types), C.n), else_=0)
    made = C.n if producer is None else sa.case((C.producer == producer, C.n), else_=0)
    stmt = sa.select(C.status, *(sa.func.sum(n) for n in (C.n, typed, made))).group_by(C.status)
    return {s: (int(n), int(of), int(by)) for s, n, of, by in tx.conn.execute(stmt).all()}


def by_type_and_status(tx: Tx) -> list[tuple[str, str, int]]:
    """How many jobs of each type and status (only those with any), over every producer."""
    stmt = sa.select(C.job_type, C.status, sa.func.sum(C.n)).group_by(C.job_type, C.status)
    return [(t, s, int(n)) for t, s, n in tx.conn.execute(stmt).all() if n]
