"""The statements every enqueue, claim and settle sends, straight on the driver's cursor.

SQLAlchemy Core's execution path (execution context, events, result metadata) costs several
times these statements themselves, so they skip it; everything else stays on Core. Their
text is the backend dialect's (`storage.dialects`), by name. Values and rows are converted as
`UTCDateTime` does: aware UTC datetimes in and out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from queuelog.domain.lifecycle import Guard, Transition
from queuelog.storage import counts
from queuelog.storage.dialect import TIME_NAMES, JobRow
from queuelog.storage.tx import EventRow, Tx

__all__ = [
    "JobRow",
    "apply",
    "apply_many",
    "claim",
    "execute",
    "expired_leases",
    "get",
    "get_many",
    "insert",
]


def execute(tx: Tx, text: str, params: Iterable[Any], prepare: bool | None = None) -> list[JobRow]:
    """Run `text`; the jobs rows it returns. `prepare=False`: PostgreSQL plans it anew each
    time (psycopg otherwise prepares a statement it has run five times, and PostgreSQL may
    keep one plan of it, made from the table's size then)."""
    dialect, cur = tx.dialect, tx.driver_cursor()
    dialect.run(cur, text, [dialect.bind(tx, p) for p in params], prepare)
    if not dialect.has_rows(cur):
        return []
    return [dialect.row(tx, r) for r in cur.fetchall()]


_NEW_JOB = {**dict.fromkeys(JobRow._fields), "retry_count": 0}  # what the table defaults


def _inserted(values: Sequence[Mapping[str, Any]], ids: Iterable[int]) -> list[JobRow]:
    """The rows just inserted from `values` (in input order, with their new `ids`), as read
    back they would be: a new job is exactly what it was given, so an insert returns its ids
    alone."""
    utc: dict[int, datetime] = {}  # a batch's rows share their times

    def at_utc(value: datetime) -> datetime:
        found = utc.get(id(value))
        if found is None:
            found = utc[id(value)] = value.astimezone(UTC)
        return found

    out: list[JobRow] = []
    for job_id, given in zip(sorted(ids), values, strict=True):
        row = {**_NEW_JOB, **given, "id": job_id}
        for name in TIME_NAMES:
            if row[name] is not None:
                row[name] = at_utc(row[name])
        out.append(JobRow(**row))
    return out


def insert(tx: Tx, values: Sequence[Mapping[str, Any]]) -> list[JobRow]:
    """Insert jobs (every row with the first row's columns; a column left out is NULL),
    rows back in input order. Where the dialect inserts their creation events with them
    (`inserts_events_with_jobs`, in a `closing` transaction), they are in too."""
    return _inserted(values, tx.dialect.insert_jobs(tx, values))


def get(tx: Tx, job_id: int) -> JobRow | None:
    found = execute(tx, tx.dialect.GET_JOB, [job_id])
    return found[0] if found else None


def claim(
    tx: Tx,
    *,
    worker: str,
    now: datetime,
    types: Sequence[str],
    limit: int,
    lease_until: Mapping[str, datetime],
) -> list[JobRow]:
    """Claim up to `limit` pending jobs of `types` that are due, most urgent first.

    ix_jobs_claim is (type, priority DESC, run_at, id) over pending jobs. The pick reads one
    range of it per type, each type's first `limit` due jobs in claim order, and keeps the
    first `limit` of those: it never walks the pending jobs of a type it was not asked for.
    Several types go in as one parameter, so the text is the same whatever their number. It
    names the literal status (a bound one would not match the partial index's WHERE).

    On PostgreSQL a claim of several types may hold, until it commits, up to `limit` jobs
    of each that it does not take. PostgreSQL may keep one generic plan of a statement
    psycopg prepared, made from the table's size then: one job's `id = (pick)` is one row by
    the primary key whatever the size; a claim of more is planned anew each time (its
    planning is shared by its jobs)."""
    types = list(dict.fromkeys(types))  # a type asked for twice is read once
    text, params, prepare = tx.dialect.claim_params(worker, now, types, limit, lease_until)
    rows = execute(tx, text, params, prepare)
    rows.sort(key=lambda r: (-r.priority, r.run_at, r.id))
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
    """The compare-and-set of `transition`: set `values` (the transition's columns, each
    given) if the job is in one of its source statuses and passes the guard
    (`worker`'s live lease at `at`, or a lease expired before `at`). The changed row, or
    None."""
    statement = tx.dialect.transitions[transition.name]
    if len(values) != len(statement.columns):
        raise ValueError(
            f"{transition.name} sets {sorted(statement.columns)}, not {sorted(values)}"
        )
    params = [values[c] for c in statement.columns]
    params.append(job_id)
    if transition.guard is Guard.LIVE_LEASE:
        params += (worker, at)
    elif transition.guard is Guard.EXPIRED_LEASE:
        params.append(at)
    found = execute(tx, statement.update, params)
    return found[0] if found else None


def apply_many(
    tx: Tx,
    transition: Transition,
    items: Sequence[tuple[int, Mapping[str, Any]]],
    *,
    worker: str | None = None,
    at: datetime | None = None,
) -> list[JobRow]:
    """`apply` on several jobs in one statement, each job (`items`: its id, its values; no
    id twice) with values of its own. The rows it changed, in no particular order."""
    columns = len(transition.sets)
    for _, values in items:
        if len(values) != columns:
            raise ValueError(
                f"{transition.name} sets {sorted(transition.sets)}, not {sorted(values)}"
            )
    text, params = tx.dialect.apply_many_params(transition, items)
    if transition.guard is Guard.LIVE_LEASE:
        params += (worker, at)
    elif transition.guard is Guard.EXPIRED_LEASE:
        params.append(at)
    return execute(tx, text, params)


def get_many(tx: Tx, ids: Sequence[int]) -> list[JobRow]:
    """The jobs among `ids` that exist, in id order."""
    text, params = tx.dialect.get_many_params(ids)
    return execute(tx, text, params)


def locked_status(tx: Tx, transition: Transition, job_id: int) -> str | None:
    """For a transition from several statuses: the job's status if it is one of them,
    locked until the transaction ends."""
    text = tx.dialect.transitions[transition.name].lock_status
    assert text is not None, f"{transition.name} starts from one status"
    cur = tx.driver_cursor()
    tx.dialect.run(cur, text, [job_id], None)
    found = cur.fetchone()
    return None if found is None else str(found[0])


def expired_leases(tx: Tx, now: datetime, limit: int) -> list[JobRow]:
    """Running jobs whose lease ended before `now`, by the partial index ix_jobs_lease
    (locked on PostgreSQL, so that one replica rescues each job once)."""
    return execute(tx, tx.dialect.EXPIRED_LEASES, [now, limit])


def insert_events(tx: Tx, rows: Sequence[EventRow]) -> str | None:
    """Append events in one statement (per SQLite's variable limit); ids ascend in order;
    and apply their job-count deltas. On PostgreSQL, both in one statement after the
    transaction's mark (`storage.events`); it returns the transaction's id. The
    transaction's other count changes (`Tx.deltas`) go in with them."""
    return tx.dialect.insert_events(tx, rows, counts.deltas(rows, tx.deltas))
