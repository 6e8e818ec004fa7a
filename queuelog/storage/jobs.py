"""Every operation on `jobs`. Each transition of `queuelog.domain.lifecycle` is applied as one
compare-and-set on its source statuses (`apply`) and records its event.

The hot statements (insert, get, claim, compare-and-set, rescue scan) go through
`storage.driver`; the rest is SQLAlchemy Core here.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Row

from queuelog.domain.lifecycle import CLAIM, RUNNING, Status, Transition
from queuelog.storage import counts as counts_sql
from queuelog.storage import driver, job_lists
from queuelog.storage import events as events_sql
from queuelog.storage.driver import JobRow
from queuelog.storage.driver import expired_leases as expired_leases  # as it is
from queuelog.storage.driver import get as get  # as it is: no event to record
from queuelog.storage.driver import get_many as get_many  # as it is
from queuelog.storage.filters import EVERY_JOB, JobFilter
from queuelog.storage.scope import Scope
from queuelog.storage.tables import job_counts, job_events, jobs
from queuelog.storage.tx import Tx

J = jobs.c
ALL = tuple(J)
_BY_KEY = sa.select(*ALL).where(
    J.producer == sa.bindparam("producer"), J.idempotency_key == sa.bindparam("key")
)


def _idempotent_insert(tx: Tx) -> Any:
    return tx.dialect.kept(
        "insert_idempotent",
        lambda insert: (
            insert(jobs)
            .on_conflict_do_nothing(index_elements=[J.producer, J.idempotency_key])
            .returning(*ALL)
        ),
    )


def insert(tx: Tx, values: Sequence[Mapping[str, Any]]) -> list[JobRow]:
    """Insert jobs (none with an idempotency key), in order, recording their creation."""
    rows = driver.insert(tx, values)
    if not (tx.dialect.inserts_events_with_jobs and tx.closing):
        for row in rows:
            tx.record(row, None)
    return rows


def insert_idempotent(tx: Tx, values: Mapping[str, Any]) -> tuple[Row[Any], bool]:
    """Insert a job with an idempotency key, or return the producer's job that holds it."""
    row = tx.conn.execute(_idempotent_insert(tx), values).first()
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
        r.idempotency_key: r for r in tx.conn.execute(_idempotent_insert(tx), list(values)).all()
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


def claim(
    tx: Tx,
    *,
    worker: str,
    now: datetime,
    types: Sequence[str],
    limit: int,
    lease_until: Mapping[str, datetime],
) -> list[JobRow]:
    """Claim up to `limit` claimable jobs of `types` in one statement, most urgent first."""
    rows = driver.claim(
        tx, worker=worker, now=now, types=types, limit=limit, lease_until=lease_until
    )
    (previous,) = CLAIM.source_values
    for row in rows:
        tx.record(row, previous)
    return rows


def apply(
    tx: Tx,
    transition: Transition,
    job_id: int,
    values: Mapping[str, Any],
    *,
    worker: str | None = None,
    at: datetime | None = None,
) -> JobRow | None:
    """Apply `transition` to the job if it is in one of the transition's source statuses
    (and passes its guard: `worker`'s lease live at `at`, or a lease expired before `at`),
    recording its event. Returns the changed row, or None when the job was not there to
    change."""
    sources = transition.source_values
    if len(sources) == 1:
        previous: str | None = sources[0]
    else:
        # Several statuses allowed: read the one we replace, locked until the end.
        previous = driver.locked_status(tx, transition, job_id)
        if previous is None:
            return None
    row = driver.apply(tx, transition, job_id, values, worker=worker, at=at)
    if row is not None and transition.records_event:
        tx.record(row, previous)
    return row


def apply_many(
    tx: Tx,
    transition: Transition,
    items: Sequence[tuple[int, Mapping[str, Any]]],
    *,
    worker: str | None = None,
    at: datetime | None = None,
) -> list[JobRow]:
    """`apply` to several jobs with one statement (a transition from one status; `items`:
    each job's id, once, and its values), recording the events of those it changed. The
    changed rows, in no particular order."""
    if not items:
        return []
    (previous,) = transition.source_values
    rows = driver.apply_many(tx, transition, items, worker=worker, at=at)
    if transition.records_event:
        for row in rows:
            tx.record(row, previous)
    return rows


def held_before(tx: Tx, job_id: int, worker: str) -> bool:
    """Whether `worker` ever claimed the job (its history says so)."""
    E = job_events.c
    stmt = (
        sa.select(E.id)
        .where(E.job_id == job_id, E.status == RUNNING, E.worker_id == worker)
        .limit(1)
    )
    return tx.conn.execute(stmt).first() is not None


def page(
    tx: Tx,
    *,
    scope: Scope,
    status: str | None,
    job_type: str | None,
    first: int,
    before_id: int | None,
    count: bool = True,
    match: JobFilter = EVERY_JOB,
) -> tuple[list[Row[Any]], bool, int | None]:
    """Newest first: up to `first` jobs in `scope` that `match`, with id below `before_id`,
    whether more follow, and (if `count`; else None) the total that match the filter: from
    the job counts when the filter names only what they count by (statuses, types, a
    producer) and the scope is not a worker's; else a count of every matching row (far
    more than the page at a deep backlog)."""
    match = match.narrowed(status, job_type)
    total = None
    if count and scope.worker is None and match.counted():  # from the counters
        producers = {p for p in (scope.producer, match.producer) if p is not None}
        total = 0
        if len(producers) < 2:
            producer = next(iter(producers), None)
            total = counts_sql.total(
                tx, producer=producer, types=match.types, statuses=match.statuses
            )
    elif count:
        cond = scope.where(jobs) + match.where(tx.dialect)
        stmt = sa.select(sa.func.count()).select_from(jobs).where(*cond)
        total = tx.conn.execute(stmt).scalar_one()
    found = job_lists.ids(tx, scope=scope, match=match, limit=first + 1, before_id=before_id)
    stmt = sa.select(*ALL).where(J.id.in_(found)).order_by(J.id.desc())
    rows = list(tx.conn.execute(stmt).all())
    return rows[:first], len(rows) > first, total


def ids_matching(
    tx: Tx,
    *,
    scope: Scope,
    match: JobFilter,
    statuses: Sequence[str],
    limit: int,
    after_id: int | None = None,
) -> list[int]:
    """Up to `limit` ids of jobs in `scope` that `match` and are in one of `statuses`
    (with id above `after_id` when given), oldest first."""
    wanted = tuple(s for s in statuses if match.statuses is None or s in match.statuses)
    found = job_lists.ids(
        tx,
        scope=scope,
        match=match._replace(statuses=wanted),
        limit=limit,
        newest=False,
        after_id=after_id,
    )
    return list(tx.conn.execute(found).scalars())


def still_matching(tx: Tx, *, scope: Scope, match: JobFilter, ids: Sequence[int]) -> list[int]:
    """Which of `ids` are of jobs in `scope` that still `match`, in id order: the check a
    write makes of ids an earlier read found. Payloads are set once, at enqueue: their
    test, the one costly condition, is not made again."""
    again = match._replace(ids=None, payload_contains=None)
    by_id = tx.dialect.selective(J.id.in_(tuple(ids)))
    cond = [by_id, *scope.where(jobs), *again.where(tx.dialect)]
    return list(tx.conn.execute(sa.select(J.id).where(*cond).order_by(J.id)).scalars())


def counts(tx: Tx, *, scope: Scope, job_type: str | None) -> dict[str, int]:
    """How many jobs in `scope` there are of each status."""
    if scope.worker is None:  # from the counters, whatever the table holds
        found = counts_sql.by_status(tx, producer=scope.producer, job_type=job_type)
    else:
        cond = scope.where(jobs)
        if job_type is not None:
            cond.append(J.type == job_type)
        stmt = sa.select(J.status, sa.func.count()).where(*cond).group_by(J.status)
        found = {status: int(n) for status, n in tx.conn.execute(stmt).all()}
    return {s.value: found.get(s.value, 0) for s in Status}


def recount(tx: Tx) -> int:
    """Set every job count from the jobs table (after jobs changed without counting: a
    replica of an earlier version, or SQL by hand); how many jobs there are. On PostgreSQL
    the counters' table is locked first: a writer's count changes wait for this
    transaction's commit and then go in on top of it, so none is lost."""
    tx.dialect.lock_counts(tx.conn)
    tx.conn.execute(job_counts.delete())
    by_key = sa.select(J.type, J.producer, J.status, sa.func.count()).group_by(
        J.type, J.producer, J.status
    )
    tx.conn.execute(
        job_counts.insert().from_select(["job_type", "producer", "status", "n"], by_key)
    )
    return sum(counts_sql.by_status(tx, producer=None, job_type=None).values())


def prune(tx: Tx, status: str, finished_before: datetime, limit: int) -> int:
    """Delete up to `limit` jobs of `status` finished before `finished_before`, with their
    events; returns how many. PostgreSQL plans these statements for the tables as they are
    (a generic plan made while the tables were small deletes events by a scan of them all;
    a batch is rare enough to pay for its planning)."""
    tx.dialect.plan_for_size(tx.conn)
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
    gone = tx.conn.execute(
        jobs.delete().where(J.id.in_(ids), J.status == status).returning(J.id, J.type, J.producer)
    ).all()
    if gone:  # ON DELETE CASCADE does this too; say it for connections without FKs
        tx.conn.execute(job_events.delete().where(job_events.c.job_id.in_([r.id for r in gone])))
        by_key = collections.Counter((r.type, r.producer) for r in gone)
        # Counted at the end, with the events, as every count change is.
        tx.deltas.extend((t, p, status, -n) for (t, p), n in sorted(by_key.items()))
    return len(gone)


def count_prunable(tx: Tx, status: str, finished_before: datetime) -> int:
    stmt = sa.select(sa.func.count()).where(J.status == status, J.finished_at < finished_before)
    return int(tx.conn.execute(stmt).scalar_one())


def progress_of(tx: Tx, job_ids: Sequence[int]) -> list[Row[Any]]:
    """The progress and status of each of these jobs (those that exist)."""
    J = jobs.c
    stmt = sa.select(J.id, J.status, J.progress, J.progress_at).where(J.id.in_(list(job_ids)))
    return list(tx.conn.execute(stmt))
