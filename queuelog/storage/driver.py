"""The statements every enqueue, claim and settle sends, straight on the driver's cursor.

SQLAlchemy Core's execution path costs ~0.1 ms a statement on this machine (execution
context, events, result metadata): several times the statement itself. These few statements
skip it (the claim's is in `storage.claims`); everything else stays on Core. Their SQL is
written here once, with `?` placeholders (`%s` on PostgreSQL). Values and rows are
converted as `UTCDateTime` does: aware UTC datetimes in and out; SQLite keeps naive UTC
text in SQLAlchemy's own format (`YYYY-MM-DD HH:MM:SS.ffffff`), so rows written either way
compare and read alike.
"""

from __future__ import annotations

import functools
import operator
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

import orjson
from sqlalchemy.dialects import postgresql

from queuelog.storage import counts
from queuelog.storage.tables import RUNNING, UTCDateTime, jobs
from queuelog.storage.tx import EventRow, Tx


class JobRow(NamedTuple):
    """A `jobs` row, in the table's column order."""

    id: int
    type: str
    payload: str
    priority: int
    status: str
    retry_count: int
    max_retries: int
    idempotency_key: str | None
    request_hash: str | None
    producer: str
    run_at: datetime
    claimed_at: datetime | None
    worker_id: str | None
    lease_expires_at: datetime | None
    error: str | None
    result: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None


assert JobRow._fields == tuple(c.name for c in jobs.c), "JobRow must follow the jobs table"
_TIME_AT = tuple(i for i, c in enumerate(jobs.c) if isinstance(c.type, UTCDateTime))
_TIME_NAMES = tuple(JobRow._fields[i] for i in _TIME_AT)
_COLUMNS = ", ".join(JobRow._fields)
RETURNING = f"RETURNING {_COLUMNS}"
# sqlite3 looks for an adapter for every None it binds and, finding none, formats and drops
# an AttributeError (~3k instructions a None: 8.7 % of a batched enqueue's, by callgrind).
# An adapter that returns None in C (an empty dict's `get`) makes that a dict lookup (3.4 %).
# It maps None to None, so no other user of sqlite3 in the process sees a difference.
_NO_NULLS: dict[None, None] = {}
sqlite3.register_adapter(type(None), _NO_NULLS.get)
# Bound values one SQLite statement may take (SQLITE_MAX_VARIABLE_NUMBER's default).
SQLITE_MAX_VARIABLES = 32_766 if sqlite3.sqlite_version_info >= (3, 32) else 999


def cursor(tx: Tx) -> Any:
    """The driver's cursor for this transaction (the same connection Core uses)."""
    if tx.cursor is None:
        driver_connection: Any = tx.conn.connection.driver_connection
        tx.cursor = driver_connection.cursor()
    return tx.cursor


_last_text: tuple[datetime | None, str] = (None, "")  # a row's times are often one instant


def bind(dialect: str, value: Any) -> Any:
    global _last_text
    if not isinstance(value, datetime) or dialect != "sqlite":
        return value
    last = _last_text
    if value is last[0]:
        return last[1]
    if value.tzinfo is None:
        raise ValueError("naive datetime")
    text = value.astimezone(UTC).isoformat(" ", "microseconds")[:26]  # without "+00:00"
    _last_text = (value, text)
    return text


_last_time: tuple[str, datetime] = ("", datetime.min)  # the same for read rows


def _time(text: str) -> datetime:
    """SQLite's stored text as an aware UTC datetime."""
    global _last_time
    last = _last_time
    if text == last[0]:
        return last[1]
    value = datetime.fromisoformat(text + "+00:00")
    _last_time = (text, value)
    return value


def _row(dialect: str, raw: Sequence[Any]) -> JobRow:
    values = list(raw)
    for i in _TIME_AT:
        v = values[i]
        if v is not None:
            values[i] = _time(v) if dialect == "sqlite" else v.astimezone(UTC)
    return JobRow._make(values)


@functools.lru_cache(maxsize=256)
def _sql(dialect: str, text: str) -> str:
    return text if dialect == "sqlite" else text.replace("?", "%s")


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def execute(tx: Tx, text: str, params: Iterable[Any], prepare: bool | None = None) -> list[JobRow]:
    """Run `text`; the jobs rows it returns. `prepare=False`: PostgreSQL plans it anew each
    time (psycopg otherwise prepares a statement it has run five times, and PostgreSQL may
    keep one plan of it, made from the table's size then)."""
    cur = cursor(tx)
    bound = [bind(tx.dialect, p) for p in params]
    if prepare is None:  # sqlite3's execute takes no `prepare`
        cur.execute(_sql(tx.dialect, text), bound)
    else:
        cur.execute(_sql(tx.dialect, text), bound, prepare=prepare)
    # psycopg builds its `description` anew on every access (~20 us for a jobs row), while
    # `rownumber` is None exactly when there is no result to fetch.
    if (cur.rownumber if tx.dialect == "postgresql" else cur.description) is None:
        return []
    return [_row(tx.dialect, r) for r in cur.fetchall()]


# -- the statements ----------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _insert_sql(dialect: str, names: tuple[str, ...], rows: int, returning: str = "id") -> str:
    columns = ", ".join(names)
    if dialect == "sqlite":
        values = ", ".join([f"({_marks(len(names))})"] * rows)
        return f"INSERT INTO jobs ({columns}) VALUES {values} RETURNING {returning}"
    # The rows go in as one JSON array of objects (`_json_rows`), so the text stays short
    # (psycopg caches its parse) whatever the batch size. (An array per column cost psycopg
    # ~9 us of Python per array to dump: 100 us for one job, half a one-job transaction's
    # CPU here.) PostgreSQL hands out the ids in the order of the SELECT's ORDER BY (the
    # form SQLAlchemy uses to sort RETURNING rows by parameter order).
    pg = postgresql.dialect()  # type: ignore[no-untyped-call]
    types = ", ".join(f"{n} {jobs.c[n].type.compile(dialect=pg)}" for n in names)
    return (
        f"INSERT INTO jobs ({columns}) SELECT {columns}"
        f" FROM ROWS FROM (json_to_recordset(%s::json) AS ({types}))"
        f" WITH ORDINALITY AS v({columns}, n) ORDER BY n RETURNING {returning}"
    )


def _json(rows: Any, times: Iterable[datetime | None]) -> str:
    """PostgreSQL: rows to insert as one JSON parameter, dumped in C. Their `times` go as
    RFC 3339 with their offset; a naive one is refused, as `bind` refuses it."""
    if any(t is not None and t.tzinfo is None for t in times):
        raise ValueError("naive datetime")
    return orjson.dumps(rows).decode()


def _json_rows(values: Sequence[Mapping[str, Any]]) -> str:
    names = [n for n in _TIME_NAMES if n in values[0]]
    return _json(values, (v[n] for v in values for n in names))


@functools.lru_cache(maxsize=64)
def _picker(names: tuple[str, ...]) -> tuple[Callable[[Mapping[str, Any]], Any], tuple[int, ...]]:
    """A row's values in `names` order as one C call, and which of them are times (only
    those need `bind`: a call per value was a tenth of a batch's CPU)."""
    pick: Callable[[Mapping[str, Any]], Any] = operator.itemgetter(*names)
    if len(names) == 1:  # itemgetter of one name gives the value, not a tuple of it

        def pick(v: Mapping[str, Any], name: str = names[0]) -> tuple[Any]:
            return (v[name],)

    times = tuple(i for i, n in enumerate(names) if isinstance(jobs.c[n].type, UTCDateTime))
    return pick, times


_NEW_JOB = {**dict.fromkeys(JobRow._fields), "retry_count": 0}  # what the table defaults


def _inserted(values: Sequence[Mapping[str, Any]], ids: Iterable[int]) -> list[JobRow]:
    """The rows just inserted from `values` (in input order, with their new `ids`), as read
    back they would be: a new job is exactly what it was given (every row has the first
    row's columns, as `insert` takes them), so an insert returns its ids alone (each column
    read back, times converted, was most of a batch's fetch)."""
    utc: dict[int, datetime] = {}  # a batch's rows share their times

    def at_utc(value: datetime) -> datetime:
        found = utc.get(id(value))
        if found is None:
            found = utc[id(value)] = value.astimezone(UTC)
        return found

    out: list[JobRow] = []
    for job_id, given in zip(sorted(ids), values, strict=True):
        row = {**_NEW_JOB, **given, "id": job_id}
        for name in _TIME_NAMES:
            if row[name] is not None:
                row[name] = at_utc(row[name])
        out.append(JobRow(**row))
    return out


def insert(tx: Tx, values: Sequence[Mapping[str, Any]]) -> list[JobRow]:
    """Insert jobs with one statement, rows back in input order (ids ascend in input order
    on both dialects)."""
    d, names = tx.dialect, tuple(values[0])
    cur = cursor(tx)
    if d == "postgresql":
        cur.execute(_insert_sql(d, names, 0), [_json_rows(values)])
        return _inserted(values, (r[0] for r in cur.fetchall()))
    ids: list[int] = []
    pick, times = _picker(names)
    most = SQLITE_MAX_VARIABLES // len(names)
    for start in range(0, len(values), most):
        params: list[Any] = []
        for v in values[start : start + most]:
            row = list(pick(v))
            for i in times:
                row[i] = bind(d, row[i])
            params += row
        cur.execute(_insert_sql(d, names, len(params) // len(names)), params)
        ids.extend(sorted(r[0] for r in cur.fetchall()))
    return _inserted(values, ids)


@functools.lru_cache(maxsize=64)
def _insert_with_events_sql(names: tuple[str, ...]) -> str:
    # The events' INSERT reads the jobs' RETURNING joined to the event-order lock's CTE, so
    # every event id is drawn under the lock, as in _PG_INSERT_EVENTS. That CTE is not read
    # by the outer SELECT, whose sort has taken every job first: PostgreSQL runs it after,
    # so the jobs' own insert stays outside the lock.
    # The job counts go up in the same statement, under the lock too (storage.counts).
    return (
        f"WITH ins AS ({_insert_sql('postgresql', names, 0, _COLUMNS)}),"
        f" ev_lock AS MATERIALIZED (SELECT {_LOCK_AND_NOTIFY}),"
        f" ev AS (INSERT INTO job_events ({_EVENT_COLUMNS})"
        " SELECT id, type, producer, worker_id, NULL, status, updated_at"
        " FROM ev_lock, ins ORDER BY id),"
        " cnt AS (INSERT INTO job_counts (job_type, producer, status, n)"
        " SELECT type, producer, status, count(*) FROM ev_lock, ins"
        " GROUP BY type, producer, status ORDER BY type, producer, status"
        f"{_ADD_COUNTS})"
        " SELECT id, pg_current_xact_id()::text FROM ins ORDER BY id"
    )


def insert_with_events(tx: Tx, values: Sequence[Mapping[str, Any]]) -> list[JobRow]:
    """PostgreSQL: `insert` and the jobs' creation events in one statement (one round trip,
    and no event rows built and sent from here), under the event-order lock like
    `insert_events`. Rows back in input order."""
    names = tuple(values[0])
    cur = cursor(tx)
    cur.execute(_insert_with_events_sql(names), [_json_rows(values)])
    raw = cur.fetchall()
    tx.appended = True
    tx.xid = raw[0][1]
    return _inserted(values, (r[0] for r in raw))


def get(tx: Tx, job_id: int) -> JobRow | None:
    found = execute(tx, f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", [job_id])
    return found[0] if found else None


def update(
    tx: Tx,
    job_id: int,
    status: str,
    values: Mapping[str, Any],
    *,
    worker: str | None = None,
    lease_live_at: datetime | None = None,
) -> JobRow | None:
    """Compare-and-set: set `values` if the job is `status` (and held by `worker` with a
    lease live at `lease_live_at`); the changed row, or None."""
    text = f"UPDATE jobs SET {', '.join(f'{k} = ?' for k in values)} WHERE id = ? AND status = ?"
    params = [*values.values(), job_id, status]
    if worker is not None:
        text += " AND worker_id = ?"
        params.append(worker)
    if lease_live_at is not None:
        text += " AND lease_expires_at > ?"
        params.append(lease_live_at)
    found = execute(tx, f"{text} {RETURNING}", params)
    return found[0] if found else None


def status_for_update(tx: Tx, job_id: int, statuses: Sequence[str]) -> str | None:
    """The job's status if it is one of `statuses`, locked until the transaction ends."""
    text = f"SELECT status FROM jobs WHERE id = ? AND status IN ({_marks(len(statuses))})"
    if tx.dialect == "postgresql":
        text += " FOR UPDATE"
    cur = cursor(tx)
    cur.execute(_sql(tx.dialect, text), [job_id, *statuses])
    found = cur.fetchone()
    return None if found is None else str(found[0])


def expired_leases(tx: Tx, now: datetime, limit: int) -> list[JobRow]:
    """Running jobs whose lease ended before `now`, by the partial index ix_jobs_lease
    (locked on PostgreSQL, so that one replica rescues each job once). SQLite's planner,
    without statistics, would read every running job through ix_jobs_finished (status,
    finished_at) and sort them: INDEXED BY holds it to the lease index."""
    held = " INDEXED BY ix_jobs_lease" if tx.dialect == "sqlite" else ""
    text = (
        f"SELECT {_COLUMNS} FROM jobs{held}"
        f" WHERE status = '{RUNNING}' AND lease_expires_at < ? ORDER BY lease_expires_at LIMIT ?"
    )
    if tx.dialect == "postgresql":
        text += " FOR UPDATE SKIP LOCKED"
    return execute(tx, text, [now, limit])


# Applies job-count deltas (storage.counts), added to what the counter rows hold.
_ADD_COUNTS = (
    " ON CONFLICT (job_type, producer, status) DO UPDATE SET n = job_counts.n + EXCLUDED.n"
)
_EVENT_COLUMNS = "job_id, job_type, producer, worker_id, previous_status, status, occurred_at"
# Event rows must become visible in id order, so that a reader tailing the feed by id never
# skips a row committed late. On PostgreSQL every statement that appends events (the
# events' INSERT at the end of a transaction, and a keyless jobs INSERT that appends its
# own) first takes this transaction-scoped advisory lock, held until commit, and queues the
# NOTIFY sent at commit.
EVENT_LOCK_KEY = 0x71_6C_65_76  # "qlev"
NOTIFY_CHANNEL = "queuelog_events"
_LOCK_AND_NOTIFY = f"pg_advisory_xact_lock({EVENT_LOCK_KEY}), pg_notify('{NOTIFY_CHANNEL}', '')"
# One statement, the rows one JSON array of arrays (as `_json_rows`; executemany there is
# one statement per row); ids in ORDER BY order, so events keep the order they were
# recorded in. Its rows exist only once the lock is held (the join needs the CTE's row), so
# every id is drawn under it. It returns the transaction's id, to ask after should the
# COMMIT fail.
# Its job-count deltas (storage.counts) go in with them, as the first JSON parameter, under
# the same lock.
_PG_INSERT_EVENTS = (
    f"WITH ev_lock AS MATERIALIZED (SELECT pg_current_xact_id()::text AS xid, {_LOCK_AND_NOTIFY}),"
    " cnt AS (INSERT INTO job_counts (job_type, producer, status, n)"
    " SELECT d->>0, d->>1, d->>2, (d->>3)::BIGINT"
    " FROM ev_lock, json_array_elements(%s::json) WITH ORDINALITY AS c(d, n)"
    f" ORDER BY n{_ADD_COUNTS})"
    f" INSERT INTO job_events ({_EVENT_COLUMNS})"
    " SELECT (e->>0)::BIGINT, e->>1, e->>2, e->>3, e->>4, e->>5, (e->>6)::TIMESTAMPTZ"
    " FROM ev_lock, json_array_elements(%s::json) WITH ORDINALITY AS v(e, n) ORDER BY n"
    " RETURNING (SELECT xid FROM ev_lock)"
)


@functools.lru_cache(maxsize=64)
def _sqlite_insert_events_sql(rows: int) -> str:
    return f"INSERT INTO job_events ({_EVENT_COLUMNS}) VALUES " + ", ".join(
        [f"({_marks(7)})"] * rows
    )


def insert_events(tx: Tx, rows: Sequence[EventRow]) -> str | None:
    """Append events in one statement (per SQLite's variable limit); ids ascend in order;
    and apply their job-count deltas. On PostgreSQL, both in one statement under the
    event-order lock; it returns the transaction's id."""
    changes = counts.deltas(rows)
    if tx.dialect == "postgresql":
        arrays = _json([tuple(row) for row in rows], (row[-1] for row in rows))
        found = cursor(tx).execute(_PG_INSERT_EVENTS, [counts.deltas_json(changes), arrays])
        row = found.fetchone()
        return None if row is None else str(row[0])
    if changes:
        marks = ", ".join(["(?, ?, ?, ?)"] * len(changes))
        cursor(tx).execute(
            f"INSERT INTO job_counts (job_type, producer, status, n) VALUES {marks}"
            " ON CONFLICT (job_type, producer, status) DO UPDATE SET n = n + excluded.n",
            [v for change in changes for v in change],
        )
    cur, most = cursor(tx), SQLITE_MAX_VARIABLES // 7
    for start in range(0, len(rows), most):
        chunk = rows[start : start + most]
        params: list[Any] = []
        for row in chunk:  # only the last value, the time, needs `bind`
            params += row
            params[-1] = bind("sqlite", row[-1])
        cur.execute(_sqlite_insert_events_sql(len(chunk)), params)
    return None
