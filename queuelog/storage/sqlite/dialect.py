"""SQLite: its hot statements and its driver's ways.

One writer thread holds the write lock (BEGIN IMMEDIATE), so nothing changes a row between
a statement's read and its write. Times are stored as naive UTC text in SQLAlchemy's own
format (`YYYY-MM-DD HH:MM:SS.ffffff`), so rows written here and by Core compare and read
alike. SQLite's planner has no statistics: INDEXED BY holds the claim and the lease scan to
their indexes.
"""

from __future__ import annotations

import contextlib
import json
import math
import operator
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

from queuelog.domain.lifecycle import PENDING, RUNNING, Transition
from queuelog.storage import deadline
from queuelog.storage.dialect import (
    COLUMNS,
    EVENT_COLUMNS,
    RETURNING,
    TIME_AT,
    Dialect,
    JobRow,
    compare_and_set_many,
    free_type_sql,
)
from queuelog.storage.filters import json_contains
from queuelog.storage.tables import UTCDateTime, jobs

# Bound values one SQLite statement may take (SQLITE_MAX_VARIABLE_NUMBER's default).
MAX_VARIABLES = 32_766 if sqlite3.sqlite_version_info >= (3, 32) else 999

_SET_CLAIMED = (
    f"UPDATE jobs SET status = '{RUNNING}', worker_id = ?, claimed_at = ?, updated_at = ?,"
)
# One range of ix_jobs_claim, in claim order.
_DUE = (
    f"SELECT id FROM jobs INDEXED BY ix_jobs_claim WHERE status = '{PENDING}'"
    " AND type = {asked} AND run_at <= ? ORDER BY priority DESC, run_at, id LIMIT ?"
)

# The type asked for, or NULL when it is paused or limited: the index range is then empty
# (as a condition beside `type = ?`, SQLite would test it on every row of the range).
_FREE_TYPE = f"(SELECT ? WHERE {free_type_sql('?')})"

# How often, in virtual machine steps, a read with a deadline looks at the clock: rarely
# enough to cost nothing noticeable, often enough to stop within milliseconds.
PROGRESS_STEPS = 10_000

# The SQL function `payload_contains` calls; each connection registers it (`storage.engines`).
JSON_CONTAINS = "queuelog_json_contains"  # the name `payload_contains` spells


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _scalars(wanted: dict[str, Any], path: str = "$") -> Iterator[tuple[str, Any]]:
    """The JSON path and value of each string, number or boolean in `wanted` reached through
    objects under plain keys only (what json_extract returns as the same SQL value)."""
    for key, value in wanted.items():
        if not _PLAIN_KEY.fullmatch(key):
            continue
        if isinstance(value, dict):
            yield from _scalars(value, f"{path}.{key}")
        elif isinstance(value, (str, int, float)):
            yield f"{path}.{key}", value


class _Reading(threading.local):
    until: float | None = None  # the deadline of the read this thread runs (`deadline`)


_reading = _Reading()


def json_contains_text(value: str | None, wanted: str | None) -> int | None:
    """`JSON_CONTAINS(value, wanted)`: 1 when JSON text `value` contains JSON text `wanted`.
    Past the deadline of the read calling it, it raises: the statement stops there (the
    progress handler counts SQLite's own steps, and a row's test is one step)."""
    if value is None or wanted is None:
        return None
    until = _reading.until
    if until is not None and time.monotonic() > until:
        raise deadline.DeadlinePassed
    try:
        return int(json_contains(orjson.loads(value), orjson.loads(wanted)))
    except orjson.JSONDecodeError:
        return 0


class SQLiteDialect(Dialect):
    name = "sqlite"
    ROW_LOCK = ""  # the writer holds the database's write lock

    # worker, now, now, lease, type, type, now, limit
    CLAIM_ONE_TYPE = (
        f"{_SET_CLAIMED} lease_expires_at = ? WHERE id IN"
        f" ({_DUE.format(asked=_FREE_TYPE)}) {RETURNING}"
    )
    # worker, now, now, leases (a JSON object by type), types (a JSON array), now, limit,
    # limit. No LATERAL: a correlated IN, run once per type, reads each type's range.
    CLAIM_TYPES = (
        f"{_SET_CLAIMED} lease_expires_at = (SELECT value FROM json_each(?) WHERE key = jobs.type)"
        " WHERE id IN (SELECT pick.id FROM (SELECT value AS name FROM json_each(?)"
        f" WHERE {free_type_sql('value')}) AS asked"
        f" CROSS JOIN jobs AS pick WHERE pick.id IN ({_DUE.format(asked='asked.name')})"
        f" ORDER BY pick.priority DESC, pick.run_at, pick.id LIMIT ?) {RETURNING}"
    )
    # `+status`: the ids are looked up by primary key; unanalyzed, SQLite would otherwise
    # read ix_jobs_status_type and walk every pending job.
    CLAIM_IDS = (
        f"{_SET_CLAIMED} lease_expires_at = ? WHERE id IN (SELECT value FROM json_each(?))"
        f" AND +status = '{PENDING}' {RETURNING}"
    )
    EXPIRED_LEASES = (
        f"SELECT {', '.join(JobRow._fields)} FROM jobs INDEXED BY ix_jobs_lease"
        f" WHERE status = '{RUNNING}' AND lease_expires_at < ? ORDER BY lease_expires_at LIMIT ?"
    )
    UPSERT_COUNTS_ROW = "(?, ?, ?, ?)"
    UPSERT_COUNTS = (
        "INSERT INTO job_counts (job_type, producer, status, n) VALUES {rows}"
        " ON CONFLICT (job_type, producer, status, shard) DO UPDATE SET n = n + excluded.n"
    )
    INSERT_EVENTS = f"INSERT INTO job_events ({EVENT_COLUMNS}) VALUES {{rows}}"

    def __init__(self) -> None:
        super().__init__()
        self._pickers: dict[tuple[str, ...], tuple[Callable[..., Any], tuple[int, ...]]] = {}

    def run(self, cur: Any, text: str, params: Sequence[Any], prepare: bool | None) -> None:
        cur.execute(text, params)  # sqlite3 caches its statements itself

    def has_rows(self, cur: Any) -> bool:
        return cur.description is not None

    def bind(self, tx: Any, value: Any) -> Any:
        if not isinstance(value, datetime):
            return value
        last = tx.bound_time  # a row's times are often one instant
        if value is last[0]:
            return last[1]
        text = self.bind_text(value)
        tx.bound_time = (value, text)
        return text

    def _time(self, tx: Any, text: str) -> datetime:
        last = tx.read_time
        if text == last[0]:
            return last[1]  # type: ignore[no-any-return]
        value = datetime.fromisoformat(text + "+00:00")
        tx.read_time = (text, value)
        return value

    def row(self, tx: Any, raw: Sequence[Any]) -> JobRow:
        values = list(raw)
        for i in TIME_AT:
            v = values[i]
            if v is not None:
                values[i] = self._time(tx, v)
        return JobRow._make(values)

    def bucket_index(self, column: Any, since_us: int, width_us: int) -> sa.ColumnElement[int]:
        # Times are stored as `YYYY-MM-DD HH:MM:SS.ffffff`: whole seconds, then the digits
        # after the point, in integers (exact), divided as integers (floored at >= 0).
        # strftime reads only the whole seconds: it would round .9995 and up to the next one.
        seconds = sa.cast(sa.func.strftime("%s", sa.func.substr(column, 1, 19)), sa.BigInteger)
        micros = seconds * 1_000_000 + sa.cast(sa.func.substr(column, 21, 6), sa.BigInteger)
        return (micros - since_us).self_group().op("/")(width_us)

    def payload_contains(self, column: Any, wanted: str) -> sa.ColumnElement[bool]:
        # Each scalar the filter holds under plain keys is first compared by json_extract,
        # in C: a payload without it cannot contain the filter, and most are passed by
        # without the Python test (SQLite tests the conditions in this order).
        contains: sa.Function[int] = sa.func.queuelog_json_contains(column, wanted)
        found = [
            sa.func.json_extract(column, path) == v for path, v in _scalars(json.loads(wanted))
        ]
        return sa.and_(*found, contains == 1)

    @contextlib.contextmanager
    def deadline(self, conn: sa.Connection, until: float | None) -> Iterator[None]:
        # A progress handler that answers true interrupts the statement running; the
        # payload test, a Python function, looks at the deadline itself.
        if until is None:
            yield
            return
        deadline.left(until)
        raw: Any = conn.connection.driver_connection
        raw.set_progress_handler(lambda: time.monotonic() > until, PROGRESS_STEPS)
        _reading.until = until
        try:
            yield
        except sa.exc.OperationalError as exc:
            # "interrupted" (the handler), or "user-defined function raised exception"
            if time.monotonic() > until:
                raise deadline.DeadlinePassed from exc
            raise
        finally:
            _reading.until = None
            raw.set_progress_handler(None, 0)

    def claim_params(
        self,
        worker: str,
        now: datetime,
        types: Sequence[str],
        limit: int,
        leases: Mapping[str, Any],
    ) -> tuple[str, list[Any], bool | None]:
        if len(types) == 1:
            return (
                self.CLAIM_ONE_TYPE,
                [worker, now, now, leases[types[0]], types[0], types[0], now, limit],
                None,
            )
        by_type = json.dumps({t: self.bind_text(leases[t]) for t in types})
        params = [worker, now, now, by_type, json.dumps(list(types)), now, limit, limit]
        return self.CLAIM_TYPES, params, None

    def claim_ids_params(
        self, worker: str, now: datetime, lease: datetime, ids: Sequence[int]
    ) -> list[Any]:
        return [worker, now, now, lease, json.dumps(list(ids))]

    @staticmethod
    def bind_text(value: datetime) -> str:
        """An aware datetime as stored: naive UTC text, without "+00:00"."""
        if value.tzinfo is None:
            raise ValueError("naive datetime")
        return value.astimezone(UTC).isoformat(" ", "microseconds")[:26]

    def _picker(self, names: tuple[str, ...]) -> tuple[Callable[..., Any], tuple[int, ...]]:
        """A row's values in `names` order as one C call, and which of them are times (only
        those need `bind`)."""
        found = self._pickers.get(names)
        if found is None:
            pick: Callable[..., Any] = operator.itemgetter(*names)
            if len(names) == 1:  # itemgetter of one name gives the value, not a tuple of it
                one = operator.itemgetter(names[0])

                def pick(v: Mapping[str, Any]) -> tuple[Any]:
                    return (one(v),)

            times = tuple(i for i, n in enumerate(names) if isinstance(jobs.c[n].type, UTCDateTime))
            found = self._pickers[names] = (pick, times)
        return found

    def apply_many_params(
        self, t: Transition, items: Sequence[tuple[int, Mapping[str, Any]]]
    ) -> tuple[str, list[Any]]:
        # The rows as one VALUES list (at most a few hundred variables: a report's batch).
        names = sorted(t.sets)
        key = ("apply_many", t.name, len(items))
        text = self._sql_cache.get(key)
        if text is None:
            one = f"({', '.join('?' * (len(names) + 1))})"
            rows = f"WITH v(id, {', '.join(names)}) AS (VALUES {', '.join([one] * len(items))})"
            text = self._sql_cache[key] = compare_and_set_many(t, rows, lambda c: f"v.{c}")
        params = [x for job_id, values in items for x in (job_id, *(values[c] for c in names))]
        return text, params

    def get_many_params(self, ids: Sequence[int]) -> tuple[str, list[Any]]:
        return self.GET_JOBS, [json.dumps(list(ids))]

    GET_JOBS = (
        f"SELECT {COLUMNS} FROM jobs WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id"
    )

    def _insert_sql(self, names: tuple[str, ...], rows: int) -> str:
        key = (names, rows)
        text = self._sql_cache.get(key)
        if text is None:
            one = f"({', '.join('?' * len(names))})"
            text = (
                f"INSERT INTO jobs ({', '.join(names)}) VALUES {', '.join([one] * rows)}"
                " RETURNING id"
            )
            self._sql_cache[key] = text
        return text

    def insert_jobs(self, tx: Any, values: Sequence[Mapping[str, Any]]) -> list[int]:
        names = tuple(values[0])
        cur = tx.driver_cursor()
        ids: list[int] = []
        pick, times = self._picker(names)
        most = MAX_VARIABLES // len(names)
        for start in range(0, len(values), most):
            params: list[Any] = []
            for v in values[start : start + most]:
                row = list(pick(v))
                for i in times:
                    row[i] = self.bind(tx, row[i])
                params += row
            cur.execute(self._insert_sql(names, len(params) // len(names)), params)
            ids.extend(sorted(r[0] for r in cur.fetchall()))
        return ids

    def insert_events(self, tx: Any, rows: Sequence[Any], counts: Sequence[Any]) -> str | None:
        cur = tx.driver_cursor()
        if counts:
            marks = ", ".join([self.UPSERT_COUNTS_ROW] * len(counts))
            cur.execute(
                self.UPSERT_COUNTS.format(rows=marks), [v for change in counts for v in change]
            )
        most = MAX_VARIABLES // 7
        for start in range(0, len(rows), most):
            chunk = rows[start : start + most]
            params: list[Any] = []
            for row in chunk:  # only the last value, the time, needs `bind`
                params += row
                params[-1] = self.bind(tx, row[-1])
            marks = ", ".join(["(?, ?, ?, ?, ?, ?, ?)"] * len(chunk))
            cur.execute(self.INSERT_EVENTS.format(rows=marks), params)
        return None  # SQLite cannot be asked how a transaction ended

    def insert(self, table: Any) -> Any:
        return sqlite.insert(table)

    def selective(self, condition: sa.ColumnElement[bool]) -> sa.ColumnElement[bool]:
        # SQLite's statistics average over all values of a column: told with unlikely().
        hinted: sa.ColumnElement[bool] = sa.func.unlikely(condition)  # as is: no "= 1"
        return hinted

    wants_shares = True

    def likelihood(self, condition: sa.ColumnElement[bool], share: float) -> sa.ColumnElement[bool]:
        # A constant of the statement (SQLite takes no parameter here), rounded to a power
        # of two so that a few statement texts serve every share.
        rounded = 2.0 ** max(-30, min(0, round(math.log2(max(share, 2.0**-30)))))
        hint = sa.literal(rounded, sa.Float, literal_execute=True)
        hinted: sa.ColumnElement[bool] = sa.func.likelihood(condition, hint)  # no "= 1"
        return hinted

    def begin_write(self, driver_connection: Any) -> None:
        driver_connection.execute("BEGIN IMMEDIATE")
