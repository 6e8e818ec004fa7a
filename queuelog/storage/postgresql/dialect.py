"""PostgreSQL: its hot statements and its driver's ways.

Rows to insert go in as one JSON parameter, so a statement's text stays the same whatever the
batch size (psycopg caches its parse) and is dumped in C. Writers take no cluster-wide lock:
event ids are drawn in many transactions at once and become visible in commit order, not
id order. So that a reader tailing the feed by id never skips a row committed late, every
statement that appends events first marks its transaction with the lowest id it may draw
(a shared, transaction-scoped advisory lock whose key carries the id: `_MARK`), and a
reader reads only up to the feed's horizon (`event_horizon`): below every marked
transaction's id and the ids drawn so far. The statement also queues the NOTIFY sent at
commit. Job-count deltas go into the counter shard of the writer's connection, in one
order (docs/design.md, "Lock order").
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import psycopg
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from queuelog.domain.lifecycle import PENDING, RUNNING, Transition
from queuelog.storage import deadline
from queuelog.storage.dialect import (
    COLUMNS,
    EVENT_COLUMNS,
    NOTIFY_CHANNEL,
    RETURNING,
    TIME_NAMES,
    CompareAndSet,
    Dialect,
    compare_and_set_many,
    free_type_sql,
)
from queuelog.storage.tables import JsonText, UTCDateTime, jobs


def _pg(text: str) -> str:
    """A statement written with `?` placeholders, as psycopg takes it."""
    return text.replace("?", "%s")


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
EVENT_LOCK_KEY = 0x71_6C_65_76  # "qlev": the event-order lock of earlier versions
MIGRATION_LOCK_KEY = 7170001
# A mark's key is MARKS + the lowest event id its transaction may draw: pg_locks shows it
# as classid (MARKS >> 32) + (id >> 32) and objid (the id's low 32 bits); ids < 2**48.
MARKS = 0x716C << 48
_MARKS_HIGH = MARKS >> 32
EVENT_SEQUENCE = "job_events_id_seq"
_NEXT_ID = (
    f"(SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM {EVENT_SEQUENCE})"
)
# Shared: marks never wait for each other, even two with one key.
_MARK = f"pg_advisory_xact_lock_shared({MARKS} + {_NEXT_ID})"
_LOCK_AND_NOTIFY = f"{_MARK}, pg_notify('{NOTIFY_CHANNEL}', '')"
# The newest id drawn so far (every id drawn later is greater).
_DRAWN = f"SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM {EVENT_SEQUENCE}"
_MARKED = (
    " FROM pg_locks l WHERE l.locktype = 'advisory' AND l.objsubid = 1"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    f" AND l.classid::bigint >= {_MARKS_HIGH} AND l.classid::bigint < {_MARKS_HIGH + (1 << 16)}"
)
# The lowest id a running transaction may yet commit.
_LOWEST_MARK = f"SELECT min(((l.classid::bigint - {_MARKS_HIGH}) << 32) + l.objid::bigint){_MARKED}"
# How long the oldest transaction still appending events has run (the feed's lag bound).
_OLDEST_MARK = (
    "SELECT coalesce(extract(epoch FROM max(clock_timestamp() - a.xact_start)), 0)"
    f"{_MARKED.replace('FROM pg_locks l', 'FROM pg_locks l JOIN pg_stat_activity a USING (pid)')}"
)  # A writer adds to the counter shard of its connection (`tables.job_counts`).
COUNT_SHARDS = 16
_SHARD = f"mod(pg_backend_pid(), {COUNT_SHARDS})"
_ADD_COUNTS = (
    " ON CONFLICT (job_type, producer, status, shard) DO UPDATE SET n = job_counts.n + EXCLUDED.n"
)
_SET_CLAIMED = (
    f"UPDATE jobs SET status = '{RUNNING}', worker_id = ?, claimed_at = ?, updated_at = ?,"
)
# Each type's first `limit` due jobs in claim order, locked as they are picked, skipping
# rows another claim has locked. Locking a row re-evaluates this WHERE on its newest
# version, and the lock keeps it so until the claim commits: the update re-checks nothing.
# {free}: the type is neither paused nor limited (for one type, a one-time filter).
_DUE = (
    f"FROM jobs WHERE status = '{PENDING}' AND type = {{asked}}{{free}} AND run_at <= ?"
    " ORDER BY priority DESC, run_at, id LIMIT ? FOR UPDATE SKIP LOCKED"
)
_PICK_TYPES = (
    "SELECT pick.id FROM (SELECT name FROM unnest(?::text[]) AS asked(name)"
    f" WHERE {free_type_sql('asked.name')}) AS asked CROSS JOIN LATERAL"
    f" (SELECT id, priority, run_at {_DUE.format(asked='asked.name', free='')}) AS pick"
    " ORDER BY pick.priority DESC, pick.run_at, pick.id LIMIT ?"
)
_PICK_ONE_TYPE = f"SELECT id {_DUE.format(asked='?', free=' AND ' + free_type_sql('?'))}"
_LEASE_BY_TYPE = "lease_expires_at = (?::json ->> type)::timestamptz"


class PostgresDialect(Dialect):
    name = "postgresql"
    ROW_LOCK = " FOR UPDATE"
    notifies = True
    inserts_events_with_jobs = True

    # One job is found by the primary key, `id = (pick)`, whatever the table's size: its
    # plan may be kept. More are planned anew each time (`claim_params`).
    # worker, now, now, lease, type, type, now, limit
    CLAIM_ONE_TYPE_ONE_JOB = _pg(
        f"{_SET_CLAIMED} lease_expires_at = ? WHERE id = ({_PICK_ONE_TYPE}) {RETURNING}"
    )
    CLAIM_ONE_TYPE = _pg(
        f"{_SET_CLAIMED} lease_expires_at = ? WHERE id = ANY (ARRAY({_PICK_ONE_TYPE})) {RETURNING}"
    )
    # worker, now, now, leases (a JSON object by type), types (an array), now, limit, limit
    CLAIM_TYPES_ONE_JOB = _pg(
        f"{_SET_CLAIMED} {_LEASE_BY_TYPE} WHERE id = ({_PICK_TYPES}) {RETURNING}"
    )
    CLAIM_TYPES = _pg(
        f"{_SET_CLAIMED} {_LEASE_BY_TYPE} WHERE id = ANY (ARRAY({_PICK_TYPES})) {RETURNING}"
    )
    CLAIM_IDS = _pg(
        f"{_SET_CLAIMED} lease_expires_at = ? WHERE id = ANY (?::bigint[])"
        f" AND status = '{PENDING}' {RETURNING}"
    )
    GET_JOB = _pg(Dialect.GET_JOB)
    # Locked, so that one replica rescues each job once.
    EXPIRED_LEASES = _pg(
        f"SELECT {COLUMNS} FROM jobs WHERE status = '{RUNNING}' AND lease_expires_at < ?"
        " ORDER BY lease_expires_at LIMIT ? FOR UPDATE SKIP LOCKED"
    )
    # Events and their job-count deltas in one statement, each a JSON array, every event
    # id drawn after the transaction's mark; event ids in input order. It returns the
    # transaction's id, to ask after should the COMMIT fail.
    INSERT_EVENTS = (
        "WITH ev_lock AS MATERIALIZED"
        f" (SELECT pg_current_xact_id()::text AS xid, {_LOCK_AND_NOTIFY}),"
        " cnt AS (INSERT INTO job_counts (job_type, producer, status, shard, n)"
        f" SELECT d->>0, d->>1, d->>2, {_SHARD}, (d->>3)::BIGINT"
        " FROM ev_lock, json_array_elements(%s::json) WITH ORDINALITY AS c(d, n)"
        f" ORDER BY n{_ADD_COUNTS})"
        f" INSERT INTO job_events ({EVENT_COLUMNS})"
        " SELECT (e->>0)::BIGINT, e->>1, e->>2, e->>3, e->>4, e->>5, (e->>6)::TIMESTAMPTZ"
        " FROM ev_lock, json_array_elements(%s::json) WITH ORDINALITY AS v(e, n) ORDER BY n"
        " RETURNING (SELECT xid FROM ev_lock)"
    )
    LOCK_MIGRATIONS = f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})"
    CUSTOM_PLANS = sa.text("SET LOCAL plan_cache_mode = force_custom_plan")
    HASH_GROUPS = sa.text("SET LOCAL enable_sort = off")
    SNAPSHOT = sa.text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")

    def __init__(self) -> None:
        super().__init__()
        self.transitions = {
            name: CompareAndSet(_pg(c.update), c.columns, c.lock_status and _pg(c.lock_status))
            for name, c in self.transitions.items()
        }

    def run(self, cur: Any, text: str, params: Sequence[Any], prepare: bool | None) -> None:
        if prepare is None:
            cur.execute(text, params)
        else:
            cur.execute(text, params, prepare=prepare)

    def has_rows(self, cur: Any) -> bool:
        # `rownumber` is None exactly when there is no result (`description` is built anew
        # on every access).
        return cur.rownumber is not None

    def bucket_index(self, column: Any, since_us: int, width_us: int) -> sa.ColumnElement[int]:
        # The seconds since `since` as a float (date_part; EXTRACT's numeric costs a few
        # times more a row): within the 1,440 buckets of a day or more, it is off by far
        # less than a microsecond, so an instant on a bucket's edge falls in that bucket.
        since = _EPOCH + timedelta(microseconds=since_us)
        seconds = sa.func.date_part("epoch", column - sa.literal(since, UTCDateTime))
        return sa.cast(sa.func.floor(seconds / (width_us / 1_000_000)), sa.BigInteger)

    @contextlib.contextmanager
    def deadline(self, conn: sa.Connection, until: float | None) -> Iterator[None]:
        # statement_timeout: the server cancels a statement at it, whatever the client
        # does meanwhile (SET takes no snapshot: SNAPSHOT may still follow).
        if until is None:
            yield
            return
        ms = math.ceil(deadline.left(until) * 1000)
        conn.exec_driver_sql(f"SET LOCAL statement_timeout = {ms}")
        try:
            yield
        except sa.exc.OperationalError as exc:
            if isinstance(exc.orig, psycopg.errors.QueryCanceled):
                raise deadline.DeadlinePassed from exc
            raise

    def snapshot(self, conn: sa.Connection) -> None:
        conn.execute(self.SNAPSHOT)

    def group_by_hash(self, conn: sa.Connection) -> None:
        conn.execute(self.HASH_GROUPS)

    def payload_contains(self, column: Any, wanted: str) -> sa.ColumnElement[bool]:
        # The column is jsonb: `@>` on it reads its GIN index (ix_jobs_payload).
        found: sa.ColumnElement[bool] = column.bool_op("@>")(sa.literal(wanted, column.type))
        return found

    def claim_params(
        self,
        worker: str,
        now: datetime,
        types: Sequence[str],
        limit: int,
        leases: Mapping[str, Any],
    ) -> tuple[str, list[Any], bool | None]:
        one = limit == 1
        if len(types) == 1:
            params = [worker, now, now, leases[types[0]], types[0], types[0], now, limit]
            text = self.CLAIM_ONE_TYPE_ONE_JOB if one else self.CLAIM_ONE_TYPE
        else:
            by_type = _json({t: leases[t] for t in types}, (leases[t] for t in types))
            params = [worker, now, now, by_type, list(types), now, limit, limit]
            text = self.CLAIM_TYPES_ONE_JOB if one else self.CLAIM_TYPES
        # A claim of more than one job is planned for its own limit and the table now.
        return text, params, None if one else False

    GET_JOBS = _pg(f"SELECT {COLUMNS} FROM jobs WHERE id = ANY (?::bigint[]) ORDER BY id")

    def get_many_params(self, ids: Sequence[int]) -> tuple[str, list[Any]]:
        return self.GET_JOBS, [list(ids)]

    def apply_many_params(
        self, t: Transition, items: Sequence[tuple[int, Mapping[str, Any]]]
    ) -> tuple[str, list[Any]]:
        # The rows as one JSON parameter, as inserts take theirs: one text whatever the count.
        names = sorted(t.sets)
        key = ("apply_many", t.name)
        text = self._sql_cache.get(key)
        if text is None:
            pg = postgresql.dialect()  # type: ignore[no-untyped-call]
            json = {n for n in names if isinstance(jobs.c[n].type, JsonText)}
            types = ", ".join(
                f"{n} {'text' if n in json else jobs.c[n].type.compile(dialect=pg)}" for n in names
            )
            rows = f"WITH v AS (SELECT * FROM json_to_recordset(?::json) AS v(id bigint, {types}))"
            text = self._sql_cache[key] = _pg(
                compare_and_set_many(t, rows, lambda c: f"v.{c}::jsonb" if c in json else f"v.{c}")
            )
        times = [n for n in TIME_NAMES if n in t.sets]
        data = [{"id": job_id, **values} for job_id, values in items]
        return text, [_json(data, (v[n] for _, v in items for n in times))]

    def _insert_sql(self, names: tuple[str, ...], returning: str) -> str:
        key = (names, returning)
        text = self._sql_cache.get(key)
        if text is None:
            # PostgreSQL hands out the ids in the order of the SELECT's ORDER BY.
            # A JSON column's value comes as a string in the rows' JSON: read as text,
            # then cast (read as jsonb, it would stay a JSON string).
            pg = postgresql.dialect()  # type: ignore[no-untyped-call]
            json = {n for n in names if isinstance(jobs.c[n].type, JsonText)}
            types = ", ".join(
                f"{n} {'text' if n in json else jobs.c[n].type.compile(dialect=pg)}" for n in names
            )
            columns = ", ".join(names)
            values = ", ".join(f"{n}::jsonb" if n in json else n for n in names)
            text = self._sql_cache[key] = (
                f"INSERT INTO jobs ({columns}) SELECT {values}"
                f" FROM ROWS FROM (json_to_recordset(%s::json) AS ({types}))"
                f" WITH ORDINALITY AS v({columns}, n) ORDER BY n RETURNING {returning}"
            )
        return text

    def _insert_with_events_sql(self, names: tuple[str, ...]) -> str:
        key = ("events", names)
        text = self._sql_cache.get(key)
        if text is None:
            # The events' INSERT reads the jobs' RETURNING joined to the mark's CTE, so every
            # event id is drawn after the mark.
            text = self._sql_cache[key] = (
                f"WITH ins AS ({self._insert_sql(names, COLUMNS)}),"
                f" ev_lock AS MATERIALIZED (SELECT {_LOCK_AND_NOTIFY}),"
                f" ev AS (INSERT INTO job_events ({EVENT_COLUMNS})"
                " SELECT id, type, producer, worker_id, NULL, status, updated_at"
                " FROM ev_lock, ins ORDER BY id),"
                " cnt AS (INSERT INTO job_counts (job_type, producer, status, shard, n)"
                f" SELECT type, producer, status, {_SHARD}, count(*) FROM ev_lock, ins"
                " GROUP BY type, producer, status ORDER BY type, producer, status"
                f"{_ADD_COUNTS})"
                " SELECT id, pg_current_xact_id()::text FROM ins ORDER BY id"
            )
        return text

    def insert_jobs(self, tx: Any, values: Sequence[Mapping[str, Any]]) -> list[int]:
        """The jobs and, when the transaction is `closing`, their creation events (and job
        counts) in one statement. Earlier in a transaction the events wait for the append
        at its end (`Tx.events`): locking counter rows here, before work that may wait for
        a row lock, would invert the lock order (docs/design.md, "Lock order")."""
        names = tuple(values[0])
        times = [n for n in TIME_NAMES if n in values[0]]
        rows = _json(values, (v[n] for v in values for n in times))
        cur = tx.driver_cursor()
        if not tx.closing:
            cur.execute(self._insert_sql(names, "id"), [rows])
            return [r[0] for r in cur.fetchall()]
        cur.execute(self._insert_with_events_sql(names), [rows])
        raw = cur.fetchall()
        tx.appended = True
        tx.xid = raw[0][1]
        return [r[0] for r in raw]

    def insert_events(self, tx: Any, rows: Sequence[Any], counts: Sequence[Any]) -> str | None:
        events = _json([tuple(row) for row in rows], (row[-1] for row in rows))
        found = tx.driver_cursor().execute(
            self.INSERT_EVENTS, [orjson.dumps(counts).decode(), events]
        )
        row = found.fetchone()
        return None if row is None else str(row[0])

    def insert(self, table: Any) -> Any:
        return postgresql.insert(table)

    def plan_for_size(self, conn: sa.Connection) -> None:
        conn.execute(self.CUSTOM_PLANS)

    def event_horizon(self, conn: sa.Connection) -> int | None:
        # In this order, each statement with a snapshot of its own: an id drawn after the
        # first is greater than it; a transaction marked after the second draws after
        # the first; one unmarked by the second had committed, and the caller's next
        # statement sees it.
        drawn = int(conn.exec_driver_sql(_DRAWN).scalar_one())
        lowest = conn.exec_driver_sql(_LOWEST_MARK).scalar()
        return drawn if lowest is None else min(drawn, int(lowest) - 1)

    def event_lag(self, conn: sa.Connection) -> float:
        return float(conn.exec_driver_sql(_OLDEST_MARK).scalar_one())

    def lock_counts(self, conn: sa.Connection) -> None:
        conn.exec_driver_sql("LOCK TABLE job_counts IN EXCLUSIVE MODE")

    def lock_migrations(self, conn: sa.Connection) -> None:
        conn.exec_driver_sql(self.LOCK_MIGRATIONS)

    def notify(self, conn: sa.Connection, channel: str) -> None:
        conn.execute(sa.text("SELECT pg_notify(:channel, '')"), {"channel": channel})

    def connection_gone(self, conn: sa.Connection) -> bool:
        if conn.invalidated:
            return True
        try:
            raw: Any = conn.connection.driver_connection
        except sa.exc.SQLAlchemyError:
            return True
        return bool(raw.broken or raw.closed)


def _json(rows: Any, times: Iterable[datetime | None]) -> str:
    """Rows as one JSON parameter, dumped in C; their `times` as RFC 3339 with their offset
    (a naive one is refused, as SQLite's bind refuses it)."""
    if any(t is not None and t.tzinfo is None for t in times):
        raise ValueError("naive datetime")
    return orjson.dumps(rows).decode()
