"""Rolling `job_events` up into `throughput_minutes`, off the read path.

Each run counts the events after the watermark, up to the feed's head and at most `batch`
ids further, by minute, type and producer (`storage.throughput`'s classification), adds the
counts into the table and moves the watermark, in one transaction. The head is the feed's
horizon (`events.head`; SQLite's one writer commits in id order), so no event at or below
it can commit later and be skipped. The watermark row is locked first: on PostgreSQL one
replica at a time rolls up, and the next one sees where it stopped. A run whose watermark
another holds skips its turn rather than wait (SKIP LOCKED): it runs in a group commit,
beside claims holding type rows, and a wait here would break the lock order
(docs/design.md, "Lock order"). Rows outlive the events
they count (retention deletes those) and go after the failed jobs' retention age."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from queuelog.storage import events as events_sql
from queuelog.storage.tables import job_events, queuelog_meta, throughput_minutes
from queuelog.storage.throughput import (
    COUNT_NAMES,
    MINUTE_US,
    ROLLED_THROUGH,
    epoch_micros,
    event_counts,
)
from queuelog.storage.tx import Tx

E = job_events.c
M = queuelog_meta.c
R = throughput_minutes.c
KEY = ("minute", "job_type", "producer")


def roll_up(tx: Tx, batch: int) -> int:
    """Roll up the next events (at most `batch` ids); how many ids the watermark moved."""
    locked = sa.select(M.value).where(M.name == ROLLED_THROUGH).with_for_update(skip_locked=True)
    found = tx.conn.execute(locked).scalar_one_or_none()
    if found is None:
        return 0  # another replica is rolling up
    after = int(found)
    upto = min(events_sql.head(tx), after + batch)
    if upto <= after:
        return 0
    minute = tx.dialect.bucket_index(E.occurred_at, 0, MINUTE_US).label("minute")
    counted = (
        sa.select(minute, E.job_type, E.producer, *event_counts())
        .where(E.id > after, E.id <= upto)
        .group_by(minute, E.job_type, E.producer)
    )
    insert = (postgresql.insert if tx.dialect.name == "postgresql" else sqlite.insert)(
        throughput_minutes
    )
    stmt = insert.from_select([*KEY, *COUNT_NAMES], counted).on_conflict_do_update(
        index_elements=list(KEY),
        set_={n: throughput_minutes.c[n] + insert.excluded[n] for n in COUNT_NAMES},
    )
    tx.conn.execute(stmt)
    tx.conn.execute(queuelog_meta.update().where(M.name == ROLLED_THROUGH).values(value=upto))
    return upto - after


def prune(tx: Tx, before: datetime, minutes: int) -> int:
    """Delete the rollup rows of minutes before `before`, at most `minutes` minutes' worth
    from the oldest (a bounded transaction); how many rows."""
    cutoff = epoch_micros(before) // MINUTE_US
    oldest = tx.conn.execute(sa.select(sa.func.min(R.minute))).scalar()
    if oldest is None or oldest >= cutoff:
        return 0
    gone = throughput_minutes.delete().where(R.minute < min(cutoff, int(oldest) + minutes))
    return int(tx.conn.execute(gone).rowcount)
