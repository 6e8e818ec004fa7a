"""`job_types`: each type's pause and flow limits, and the claim that obeys the limits.

A type with no row is neither paused nor limited. Every claim reads the rows of the types it
asks for, in its own transaction (`states`), so a pause or a limit is seen by every replica
at its next claim. Unlimited types are claimed by the ordinary claim statement
(`storage.jobs.claim`); a limited type by `claim_limited`, below.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from queuelog.domain.lifecycle import CLAIM, PENDING, RUNNING, Status
from queuelog.storage import driver
from queuelog.storage.dialect import TYPES_CHANNEL
from queuelog.storage.driver import JobRow
from queuelog.storage.scope import Scope
from queuelog.storage.tables import job_counts, job_types, jobs
from queuelog.storage.tx import Tx

T = job_types.c
J = jobs.c
# Literal statuses: the partial indexes name them so (a bound one would not match).
_IS_PENDING = sa.text(f"jobs.status = '{PENDING}'")
_IS_RUNNING = sa.text(f"jobs.status = '{RUNNING}'")
CHUNK_MIN = 32  # candidates a limited claim reads at a time, at the least
PROBES_MAX = 50  # types whose oldest pending job one statement looks up
# A row whose type the limited claim serves (only such a row is locked).
_LIMITED_NOT_PAUSED = sa.and_(
    sa.not_(T.paused),
    sa.or_(
        T.max_running.is_not(None),
        T.max_running_per_key.is_not(None),
        T.max_starts_per_second.is_not(None),
    ),
)
# Marks, in `Tx.done`, a type whose row the transaction has locked (`claim_limited`).
_HELD = "job_types:"


def _held(tx: Tx) -> list[str]:
    """The types whose rows this transaction holds locked."""
    return [d[len(_HELD) :] for d in tx.done if d.startswith(_HELD)]


def stats_by_type(tx: Tx, scope: Scope, names: Sequence[str]) -> dict[str, dict[str, int]]:
    """How many jobs of each type in `names` and status `scope` may see: from the job
    counts, or for a worker's scope (the counts carry no worker) from its own jobs."""
    wanted = set(names)
    out = {n: {s.value: 0 for s in Status} for n in names}
    if scope.worker is None:
        C = job_counts.c
        stmt = sa.select(C.job_type, C.status, sa.func.sum(C.n)).group_by(C.job_type, C.status)
        if scope.producer is not None:
            stmt = stmt.where(C.producer == scope.producer)
    else:
        stmt = (
            sa.select(J.type, J.status, sa.func.count())
            .where(*scope.where(jobs))
            .group_by(J.type, J.status)
        )
    for name, status, n in tx.conn.execute(stmt).all():
        if name in wanted:
            out[name][status] = int(n)
    return out


@dataclass(frozen=True, slots=True)
class TypeState:
    """A type's row: paused, its limits (None: no limit), and its token bucket."""

    name: str
    paused: bool = False
    max_running: int | None = None
    max_running_per_key: int | None = None
    max_starts_per_second: float | None = None
    tokens: float = 0.0
    tokens_at: datetime | None = None

    @property
    def limited(self) -> bool:
        return (
            self.max_running is not None
            or self.max_running_per_key is not None
            or self.max_starts_per_second is not None
        )

    def tokens_now(self, now: datetime) -> float:
        """The bucket's tokens at `now`: refilled at the rate since `tokens_at`, up to the
        burst, max(1, rate). A bucket never spent is full."""
        rate = self.max_starts_per_second
        if rate is None:
            return math.inf
        burst = max(1.0, rate)
        if self.tokens_at is None:
            return burst
        elapsed = max(0.0, (now - self.tokens_at).total_seconds())
        return min(burst, self.tokens + elapsed * rate)

    def next_token_in(self, now: datetime) -> float | None:
        """Seconds until the bucket holds a whole token (0: it does); None: no rate limit."""
        rate = self.max_starts_per_second
        if rate is None:
            return None
        return max(0.0, (1.0 - self.tokens_now(now)) / rate)


def _state(row: Any) -> TypeState:
    return TypeState(
        name=row.name,
        paused=bool(row.paused),
        max_running=row.max_running,
        max_running_per_key=row.max_running_per_key,
        max_starts_per_second=row.max_starts_per_second,
        tokens=row.tokens,
        tokens_at=row.tokens_at,
    )


def states(tx: Tx, names: Iterable[str]) -> dict[str, TypeState]:
    """The rows of these types that exist, by name (one probe of the primary key each)."""
    wanted = list(names)
    if not wanted:
        return {}
    found = tx.conn.execute(sa.select(job_types).where(T.name.in_(wanted))).all()
    return {r.name: _state(r) for r in found}


def seed(tx: Tx, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert these rows where their type has none yet (the TOML file's values seed; what
    the API set since wins)."""
    if rows:
        insert = tx.dialect.insert(job_types).on_conflict_do_nothing(index_elements=[T.name])
        tx.conn.execute(insert, list(rows))


def upsert(tx: Tx, name: str, values: Mapping[str, Any]) -> TypeState:
    """Set `values` on the type's row, creating it (unpaused, unlimited) if it has none.

    It waits for the row only in the lock order (see `claim_limited`): a transaction that
    holds a later type's row, or has appended its events, takes it only if it is free (NOWAIT),
    else fails, and the writer runs this write again in a transaction of its own."""
    if tx.appended or any(held > name for held in _held(tx)):
        tx.conn.execute(sa.select(T.name).where(T.name == name).with_for_update(nowait=True))
    insert = tx.dialect.insert(job_types)
    row = {
        "name": name,
        "paused": False,
        "tokens": 0.0,
        "tokens_at": None,
        "max_running": None,
        "max_running_per_key": None,
        "max_starts_per_second": None,
        **values,
    }
    stmt = insert.values(row).on_conflict_do_update(index_elements=[T.name], set_=dict(values))
    tx.conn.execute(stmt)
    tx.done.add(_HELD + name)  # the row is locked until commit: see `claim_limited`
    tx.dialect.notify(tx.conn, TYPES_CHANNEL)  # waiting claims on other replicas try again
    found = states(tx, [name])
    return found[name]


def oldest_pending(
    tx: Tx, scope: Scope, names: Sequence[str], priorities: Sequence[int], now: datetime
) -> dict[str, Any]:
    """The earliest runAt among each type's PENDING jobs that `scope` may see and that are
    due at `now` (None when none is): per type and priority, the first entry of that range
    of ix_jobs_claim, PROBES_MAX types a statement."""
    out: dict[str, Any] = {}
    for start in range(0, len(names), PROBES_MAX):
        chunk = names[start : start + PROBES_MAX]
        out.update(_oldest_pending(tx, scope, chunk, priorities, now))
    return out


def _oldest_pending(
    tx: Tx, scope: Scope, names: Sequence[str], priorities: Sequence[int], now: datetime
) -> dict[str, Any]:
    probes = []
    for i, name in enumerate(names):
        for j, priority in enumerate(priorities):
            probe = (
                sa.select(J.run_at)
                .where(_IS_PENDING, J.type == name, J.priority == priority, J.run_at <= now)
                .where(*scope.where(jobs))
                .order_by(J.run_at)
                .limit(1)
                .scalar_subquery()
                .label(f"t{i}_{j}")
            )
            probes.append(probe)
    row = tx.conn.execute(sa.select(*probes)).one()
    out: dict[str, Any] = {}
    for i, name in enumerate(names):
        found = [row[i * len(priorities) + j] for j in range(len(priorities))]
        times = [t for t in found if t is not None]
        out[name] = min(times) if times else None
    return out


def claim_limited(
    tx: Tx, *, worker: str, now: datetime, name: str, limit: int, lease_until: datetime
) -> list[JobRow]:
    """Claim up to `limit` due jobs of the limited type `name` that its limits allow, in
    claim order, skipping jobs whose concurrency key is at its limit.

    Why no limit is ever overtaken: only a claim makes a job RUNNING, and every claim of a
    limited type first locks the type's row (PostgreSQL `FOR UPDATE`; on SQLite the writer
    holds the database's write lock), held until its transaction commits. The statements
    after the lock each take a new snapshot (READ COMMITTED), so they see every job the
    previous holder claimed; the counts of running jobs they read cannot change until this
    transaction ends. The token bucket is in the same locked row.

    Why no deadlock (the lock order, docs/design.md "Lock order"): a transaction (a group
    commit runs several claims in one) waits for a type's row only if every type row it
    holds sorts before that one, and only while it has not appended its events (on
    PostgreSQL the append locks the job counter rows, the last locks a transaction takes:
    its claim events are appended at the end, after this row lock); else it takes the row
    only if it is free (SKIP LOCKED) and, if not, claims nothing of the type this time.
    Waits then only ever go from lower names to higher ones, and from row locks to counter
    rows, so they cannot form a cycle."""
    may_wait = not tx.appended and all(held < name for held in _held(tx))
    lock = (
        sa.select(job_types)
        .where(T.name == name, _LIMITED_NOT_PAUSED)
        .with_for_update(skip_locked=not may_wait)
    )
    locked = tx.conn.execute(lock).first()
    if locked is None:
        return []  # not limited, paused, or held by another transaction we may not wait for
    tx.done.add(_HELD + name)
    state = _state(locked)
    per_key = _running_by_key(tx, name)
    budget = limit
    if state.max_running is not None:
        budget = min(budget, state.max_running - sum(per_key.values()))
    tokens = state.tokens_now(now)
    if state.max_starts_per_second is not None:
        budget = min(budget, math.floor(tokens))
    if budget <= 0:
        return []
    ids = _pick(tx, name, now, budget, per_key, state.max_running_per_key)
    if not ids:
        return []
    rows = _claim_ids(tx, worker, now, ids, lease_until)
    if state.max_starts_per_second is not None:
        # `now` was read before the lock was: a claim that waited for it must not move the
        # bucket's time back, or the next claim refills the same interval twice.
        at = max(now, state.tokens_at) if state.tokens_at is not None else now
        tx.conn.execute(
            job_types.update().where(T.name == name).values(tokens=tokens - len(rows), tokens_at=at)
        )
    return rows


def _running_by_key(tx: Tx, name: str) -> dict[str | None, int]:
    """How many jobs of the type are RUNNING, per concurrency key (None: no key), from the
    partial index that holds only running jobs."""
    stmt = (
        sa.select(J.concurrency_key, sa.func.count())
        .where(_IS_RUNNING, J.type == name)
        .group_by(J.concurrency_key)
    )
    return {key: int(n) for key, n in tx.conn.execute(stmt).all()}


def _pick(
    tx: Tx,
    name: str,
    now: datetime,
    budget: int,
    running: Mapping[str | None, int],
    per_key: int | None,
) -> list[int]:
    """Up to `budget` ids of due PENDING jobs of `name` in claim order, at most `per_key`
    running or picked per concurrency key. It reads the claim index in chunks, each leaving
    out the keys already at their limit, so a saturated key is skipped in SQL."""
    left: dict[str | None, int] = {}
    if per_key is not None:
        left = {k: per_key - n for k, n in running.items() if k is not None}
    picked: list[int] = []
    after: tuple[int, datetime, int] | None = None
    chunk = max(CHUNK_MIN, 4 * budget)
    while len(picked) < budget:
        cond: list[sa.ColumnElement[bool] | sa.TextClause] = [
            _IS_PENDING,
            J.type == name,
            J.run_at <= now,
        ]
        full = [k for k, n in left.items() if n <= 0]
        if full:
            cond.append(sa.or_(J.concurrency_key.is_(None), J.concurrency_key.not_in(full)))
        if after is not None:
            p, r, i = after  # after the last one read, in claim order
            later = sa.or_(J.run_at > r, sa.and_(J.run_at == r, J.id > i))
            cond.append(sa.or_(J.priority < p, sa.and_(J.priority == p, later)))
        stmt = (
            sa.select(J.id, J.priority, J.run_at, J.concurrency_key)
            .where(*cond)
            .order_by(J.priority.desc(), J.run_at, J.id)
            .limit(chunk)
        )
        rows = tx.conn.execute(stmt).all()
        for row in rows:
            key = row.concurrency_key
            if per_key is not None and key is not None:
                if left.get(key, per_key) <= 0:
                    continue
                left[key] = left.get(key, per_key) - 1
            picked.append(row.id)
            if len(picked) == budget:
                break
        if len(rows) < chunk:
            break
        last = rows[-1]
        after = (last.priority, last.run_at, last.id)
    return picked


def _claim_ids(
    tx: Tx, worker: str, now: datetime, ids: Sequence[int], lease_until: datetime
) -> list[JobRow]:
    """The claim transition on these jobs (those still PENDING), recording its events."""
    rows = driver.execute(
        tx, tx.dialect.CLAIM_IDS, tx.dialect.claim_ids_params(worker, now, lease_until, ids)
    )
    (previous,) = CLAIM.source_values
    for row in rows:
        tx.record(row, previous)
    rows.sort(key=lambda r: (-r.priority, r.run_at, r.id))
    return rows
