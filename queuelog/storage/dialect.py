"""What differs between SQLite and PostgreSQL, in one object per backend, chosen once when the
database opens (`storage.engines.for_backend`) and handed to storage with every transaction
(`Tx.dialect`).

Each backend's module holds its hot statements, by name, with `?` placeholders (PostgreSQL's
are turned into `%s` once, at import), and what its driver needs: how values bind, how rows
read back, how a write transaction begins, what locks and notifications it has. The
statements of the state machine's compare-and-sets are made here, once per backend, from the
table in `queuelog.domain.lifecycle`. Everything else in storage is SQLAlchemy Core.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar, NamedTuple

import sqlalchemy as sa

from queuelog.domain.lifecycle import COMPARE_AND_SET, Guard, Transition
from queuelog.storage.tables import UTCDateTime, jobs


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
    progress: str | None = None
    progress_at: datetime | None = None
    concurrency_key: str | None = None


assert JobRow._fields == tuple(c.name for c in jobs.c), "JobRow must follow the jobs table"
TIME_AT = tuple(i for i, c in enumerate(jobs.c) if isinstance(c.type, UTCDateTime))
TIME_NAMES = tuple(JobRow._fields[i] for i in TIME_AT)
COLUMNS = ", ".join(JobRow._fields)
RETURNING = f"RETURNING {COLUMNS}"
EVENT_COLUMNS = "job_id, job_type, producer, worker_id, previous_status, status, occurred_at"
NOTIFY_CHANNEL = "queuelog_events"  # PostgreSQL: a transaction appended events
KEYS_CHANNEL = "queuelog_keys"  # PostgreSQL: a key was revoked; replicas drop cached keys
TYPES_CHANNEL = "queuelog_types"  # PostgreSQL: a job type's pause or limits changed


def free_type_sql(name: str) -> str:
    """SQL true when the job type `name` (an expression) is neither paused nor limited: the
    one-statement claim takes only those (`storage.job_types` claims the limited ones). A
    probe of job_types' primary key, once per type asked for."""
    return (
        f"NOT EXISTS (SELECT 1 FROM job_types WHERE job_types.name = {name} AND (paused"
        " OR max_running IS NOT NULL OR max_running_per_key IS NOT NULL"
        " OR max_starts_per_second IS NOT NULL))"
    )


class CompareAndSet(NamedTuple):
    """A transition's statements: the update and, when it may start from several statuses,
    the read that locks the job and tells which one it is in."""

    update: str
    columns: tuple[str, ...]  # the order its values bind in, after which the job id
    lock_status: str | None


def compare_and_set(t: Transition, row_lock: str) -> CompareAndSet:
    """The compare-and-set of transition `t`: UPDATE ... WHERE id = ? AND status IN
    (sources) [and its guard] RETURNING the row. The statuses are literals (the table's
    partial indexes name them so)."""
    columns = tuple(sorted(t.sets))
    sets = [f"status = '{t.target.value}'", *(f"{c} = ?" for c in columns)]
    sets += [f"{c} = NULL" for c in sorted(t.clears)]
    sources = ", ".join(f"'{s}'" for s in t.source_values)
    where = f"id = ? AND status IN ({sources})"
    if t.guard is Guard.LIVE_LEASE:
        where += " AND worker_id = ? AND lease_expires_at > ?"
    elif t.guard is Guard.EXPIRED_LEASE:
        where += " AND lease_expires_at < ?"
    update = f"UPDATE jobs SET {', '.join(sets)} WHERE {where} {RETURNING}"
    lock = None
    if len(t.sources) > 1:
        lock = f"SELECT status FROM jobs WHERE id = ? AND status IN ({sources}){row_lock}"
    return CompareAndSet(update, columns, lock)


def compare_and_set_many(t: Transition, rows: str, value: Callable[[str], str]) -> str:
    """The compare-and-set of transition `t` (from one status) on many jobs in one statement,
    each with values of its own: `rows` defines `v` (`id`, then the transition's columns in
    sorted order) and `value(c)` reads its column `c`. It returns the rows it changed."""
    assert len(t.sources) == 1, f"{t.name} starts from several statuses"
    sets = [f"status = '{t.target.value}'", *(f"{c} = {value(c)}" for c in sorted(t.sets))]
    sets += [f"{c} = NULL" for c in sorted(t.clears)]
    where = f"jobs.id = v.id AND jobs.status = '{t.source_values[0]}'"
    if t.guard is Guard.LIVE_LEASE:
        where += " AND jobs.worker_id = ? AND jobs.lease_expires_at > ?"
    elif t.guard is Guard.EXPIRED_LEASE:
        where += " AND jobs.lease_expires_at < ?"
    returning = ", ".join(f"jobs.{c}" for c in JobRow._fields)
    return f"{rows} UPDATE jobs SET {', '.join(sets)} FROM v WHERE {where} RETURNING {returning}"


class Dialect:
    """The base every backend fills in: its name, its statements and its driver's ways."""

    name: ClassVar[str]
    # A claim's statements: one type (one lease), or several types (a lease for each),
    # for one job or up to a limit.
    CLAIM_ONE_TYPE: ClassVar[str]
    CLAIM_TYPES: ClassVar[str]
    # The claim of jobs already picked by id (a limited type's, `storage.job_types`), those
    # still PENDING: worker, now, now, lease, the ids (`claim_ids_params`).
    CLAIM_IDS: ClassVar[str]
    GET_JOB: ClassVar[str] = f"SELECT {COLUMNS} FROM jobs WHERE id = ?"
    EXPIRED_LEASES: ClassVar[str]
    ROW_LOCK: ClassVar[str]  # appended to a SELECT that locks the rows it reads
    # Each write of a group commit runs under a savepoint of its own, so that one that
    # raises is undone alone (`storage.batches.run_calls`). Savepoints of one name nest;
    # none is released: COMMIT keeps what each holds.
    SAVEPOINT: ClassVar[str] = "SAVEPOINT queuelog_write"
    ROLLBACK_TO_SAVEPOINT: ClassVar[str] = "ROLLBACK TO SAVEPOINT queuelog_write"
    notifies: ClassVar[bool] = False  # whether other processes are told of commits
    # Whether `insert_jobs` appends the jobs' events itself, in a `closing` transaction
    # (see `PostgresDialect.insert_jobs`).
    inserts_events_with_jobs: ClassVar[bool] = False

    def __init__(self) -> None:
        self.transitions = {t.name: compare_and_set(t, self.ROW_LOCK) for t in COMPARE_AND_SET}
        self._core: dict[str, Any] = {}
        self._sql_cache: dict[tuple[Any, ...], str] = {}  # statements sized to their rows

    def __repr__(self) -> str:
        return f"<{self.name} dialect>"

    # -- the driver ---------------------------------------------------------------------

    def run(self, cur: Any, text: str, params: Sequence[Any], prepare: bool | None) -> None:
        """Run `text` on the driver's cursor. `prepare=False`: plan it anew each time."""
        raise NotImplementedError

    def has_rows(self, cur: Any) -> bool:
        """Whether the statement just run returns rows."""
        raise NotImplementedError

    def bind(self, tx: Any, value: Any) -> Any:
        """A value as the driver binds it (times as the backend stores them)."""
        return value

    def row(self, tx: Any, raw: Sequence[Any]) -> JobRow:
        """A jobs row read back, its times aware UTC datetimes."""
        values = list(raw)
        for i in TIME_AT:
            v = values[i]
            if v is not None:
                values[i] = v.astimezone(UTC)
        return JobRow._make(values)

    def bucket_index(self, column: Any, since_us: int, width_us: int) -> sa.ColumnElement[int]:
        """The index of the time bucket `column`'s instant falls in, counting buckets of
        `width_us` microseconds from `since_us` microseconds after the epoch (floored)."""
        raise NotImplementedError

    def payload_contains(self, column: Any, wanted: str) -> sa.ColumnElement[bool]:
        """Whether the JSON text in `column` contains the JSON object `wanted`, as
        PostgreSQL's jsonb `@>` reads it."""
        raise NotImplementedError

    def claim_params(
        self,
        worker: str,
        now: datetime,
        types: Sequence[str],
        limit: int,
        leases: Mapping[str, Any],
    ) -> tuple[str, list[Any], bool | None]:
        """The claim statement for these arguments, its parameters, and its `prepare`."""
        raise NotImplementedError

    def claim_ids_params(
        self, worker: str, now: datetime, lease: datetime, ids: Sequence[int]
    ) -> list[Any]:
        """CLAIM_IDS's parameters."""
        return [worker, now, now, lease, list(ids)]

    def apply_many_params(
        self, t: Transition, items: Sequence[tuple[int, Mapping[str, Any]]]
    ) -> tuple[str, list[Any]]:
        """The compare-and-set of `t` on each job of `items` (its id, its values) in one
        statement (`compare_and_set_many`), and its parameters before the guard's."""
        raise NotImplementedError

    def get_many_params(self, ids: Sequence[int]) -> tuple[str, list[Any]]:
        """The read of the jobs `ids` (by primary key, in id order), and its parameters."""
        raise NotImplementedError

    def insert_jobs(self, tx: Any, values: Sequence[Mapping[str, Any]]) -> list[int]:
        """Insert jobs with as few statements as the backend allows; their ids, ascending in
        input order."""
        raise NotImplementedError

    def insert_events(self, tx: Any, rows: Sequence[Any], counts: Sequence[Any]) -> str | None:
        """Append events and apply their job-count deltas; the transaction's id if the
        backend can be asked later how it ended."""
        raise NotImplementedError

    # -- Core ---------------------------------------------------------------------------

    def insert(self, table: sa.Table) -> Any:
        """The backend's INSERT construct (it has ON CONFLICT)."""
        raise NotImplementedError

    def kept(self, name: str, build: Callable[[Callable[[sa.Table], Any]], Any]) -> Any:
        """A Core statement built once per dialect from its INSERT construct."""
        found = self._core.get(name)
        if found is None:
            found = self._core[name] = build(self.insert)
        return found

    def begin_write(self, driver_connection: Any) -> None:
        """Begin a write transaction on the driver's connection."""

    def plan_for_size(self, conn: sa.Connection) -> None:
        """Have this transaction's statements planned for the tables' size now."""

    def group_by_hash(self, conn: sa.Connection) -> None:
        """Have this transaction's GROUP BY hash its groups: PostgreSQL cannot tell how
        many groups a computed key makes, reckons one a row, and would sort every row."""

    @contextlib.contextmanager
    def deadline(self, conn: sa.Connection, until: float | None) -> Iterator[None]:
        """Hold this read transaction's statements to `until` (a `time.monotonic()`
        instant; None: no deadline): one still running then is stopped, and
        `storage.deadline.DeadlinePassed` raised. Call before its first query."""
        yield

    def snapshot(self, conn: sa.Connection) -> None:
        """Have this read transaction's statements all see one snapshot (SQLite's do;
        call before the transaction's first query)."""

    def event_horizon(self, conn: sa.Connection) -> int | None:
        """The newest event id at or below which every event this transaction's later
        statements see is every event there will ever be (None: every committed event,
        as with SQLite's one writer, whose events commit in id order). Call before those
        statements."""
        return None

    def event_lag(self, conn: sa.Connection) -> float:
        """How long the feed's readers may be held back: the age in seconds of the oldest
        transaction still appending events (0 with one writer)."""
        return 0.0

    def lock_counts(self, conn: sa.Connection) -> None:
        """Hold every job counter, against writers, until this transaction ends (SQLite's
        one writer needs nothing)."""

    def lock_migrations(self, conn: sa.Connection) -> None:
        """Let one process at a time migrate."""

    def notify(self, conn: sa.Connection, channel: str) -> None:
        """Tell other processes, at commit, on `channel`."""

    def selective(self, condition: sa.ColumnElement[bool]) -> sa.ColumnElement[bool]:
        """`condition`, marked as one few rows meet, whatever the statistics say (a read's
        scope: one producer may own nearly every event, and another's read must still
        take its own index range)."""
        return condition

    # Whether a read's planner should be told each condition's share of the rows
    # (`likelihood`), read from the job counts: its statistics cannot tell a rare value of
    # a column from a common one.
    wants_shares: ClassVar[bool] = False

    def likelihood(self, condition: sa.ColumnElement[bool], share: float) -> sa.ColumnElement[bool]:
        """`condition`, marked as true of about `share` (0 to 1) of the rows it is tested on,
        where the backend's planner takes such a mark (`wants_shares`)."""
        return condition

    def connection_gone(self, conn: sa.Connection) -> bool:
        """Whether `conn` is known to be gone (so that nothing tries to roll it back)."""
        return False
