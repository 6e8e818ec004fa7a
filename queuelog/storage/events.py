"""Reads of the append-only `job_events` feed (rows are appended by `Database.write`).

On PostgreSQL events commit out of id order (writers take no common lock): a read that
follows the feed by id reads only up to its horizon (`readable`), at or below which no
event will commit any more, so it never passes an id that a running transaction still
holds. A long write transaction holds readers back, never writers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Row

from queuelog.storage.scope import EVERYTHING, Scope
from queuelog.storage.tables import job_events, queuelog_meta
from queuelog.storage.tx import Tx

E = job_events.c
M = queuelog_meta.c
PRUNED_THROUGH = "events_pruned_through"


def for_job(tx: Tx, job_id: int, first: int) -> list[Row[Any]]:
    stmt = sa.select(*E).where(E.job_id == job_id).order_by(E.id).limit(first)
    return list(tx.conn.execute(stmt).all())


def after(
    tx: Tx,
    cursor: int,
    limit: int,
    *,
    job_id: int | None = None,
    job_type: str | None = None,
    statuses: Sequence[str] | None = None,
    scope: Scope = EVERYTHING,
    upto: int | None = None,
) -> list[Row[Any]]:
    """Events in `scope` with id > cursor (and <= upto), oldest first, filtered. A scope
    is read by its own index (`Dialect.selective`): a key replaying from an old cursor reads
    its own events, never a walk of every later event of others."""
    cond: list[sa.ColumnElement[bool]] = [E.id > cursor]
    if upto is not None:
        cond.append(E.id <= upto)
    if job_id is not None:
        cond.append(E.job_id == job_id)
    if job_type is not None:
        cond.append(E.job_type == job_type)
    if statuses:
        cond.append(E.status.in_(statuses))
    cond += [tx.dialect.selective(c) for c in scope.where(job_events)]
    stmt = sa.select(*E).where(*cond).order_by(E.id).limit(limit)
    return list(tx.conn.execute(stmt).all())


def readable(tx: Tx) -> int | None:
    """The feed's horizon: the newest id at or below which this transaction's later
    statements see every event there will ever be (None: every event they see). Call
    first in a read (`Dialect.event_horizon`)."""
    return tx.dialect.event_horizon(tx.conn)


def head(tx: Tx) -> int:
    """The newest event id a reader may follow from, the feed's horizon (0 when there is
    no event)."""
    horizon = readable(tx)
    newest = newest_drawn(tx)
    return newest if horizon is None else min(newest, horizon)


def lag(tx: Tx) -> float:
    """How long readers may be held below the newest events: the age in seconds of the
    oldest transaction still appending events (0 with one writer)."""
    return tx.dialect.event_lag(tx.conn)


def newest_drawn(tx: Tx) -> int:
    """The newest committed event id, whether or not readers may follow to it yet (0 when
    there is none)."""
    return int(tx.conn.execute(sa.select(sa.func.coalesce(sa.func.max(E.id), 0))).scalar_one())


def oldest(tx: Tx) -> int:
    """The oldest retained event id (0 when there is none)."""
    return int(tx.conn.execute(sa.select(sa.func.coalesce(sa.func.min(E.id), 0))).scalar_one())


def pruned_through(tx: Tx) -> int:
    """The newest event id retention has deleted (0 when none has been)."""
    stmt = sa.select(M.value).where(M.name == PRUNED_THROUGH)
    return int(tx.conn.execute(stmt).scalar_one_or_none() or 0)


def note_pruned(tx: Tx, job_ids: Sequence[int]) -> None:
    """Raise the pruned-through watermark over the events of `job_ids`, about to be deleted.

    `max(id + 0)`, not `max(id)`: PostgreSQL turns `max(id)` into a backward walk of the
    primary key until an event of one of these jobs turns up, and pruned jobs are the
    oldest, so it walked nearly every event. Their events are found by ix_job_events_job instead."""
    newest = sa.func.max(E.id + 0)
    top = tx.conn.execute(sa.select(newest).where(E.job_id.in_(job_ids))).scalar()
    if top is not None:
        tx.conn.execute(
            queuelog_meta.update().where(M.name == PRUNED_THROUGH, M.value < top).values(value=top)
        )
