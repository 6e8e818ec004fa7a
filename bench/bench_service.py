"""1. The service layer without HTTP against the raw driver running the same statements.

The reference is what the service would cost if it were free: the same SQL the storage layer
sends (claim, rescue check, compare-and-set, event row, job-count deltas; on PostgreSQL the
event lock and NOTIFY too), one transaction per operation, with the same durability
(SQLite: WAL, synchronous=FULL, BEGIN IMMEDIATE), straight from the benchmark's thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from bench.common import Profile, median, psycopg_url, sqlite_path
from queuelog.config import Settings
from queuelog.runtime import open_services
from queuelog.service.models import Actor, EnqueueRequest, Role
from queuelog.storage.dialect import NOTIFY_CHANNEL
from queuelog.storage.migrate import migrate
from queuelog.storage.postgresql.dialect import EVENT_LOCK_KEY

PRODUCER = Actor("bench-producer", Role.PRODUCER)
WORKER = Actor("bench-worker", Role.WORKER)
LEASE = timedelta(seconds=300)

_INSERT_JOB = (
    "INSERT INTO jobs (type, payload, priority, status, retry_count, max_retries,"
    " idempotency_key, request_hash, producer, run_at, created_at, updated_at)"
    " VALUES (?, ?, 0, 'pending', 0, 3, NULL, NULL, ?, ?, ?, ?) RETURNING *"
)
_INSERT_EVENT = (
    "INSERT INTO job_events (job_id, job_type, producer, worker_id, previous_status, status,"
    " occurred_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
# The job counts: one less of the previous status (if any), one more of the new, in one
# statement (on PostgreSQL in the events' statement, as queuelog sends them).
_ADD_COUNT = (
    " ON CONFLICT (job_type, producer, status, shard) DO UPDATE SET n = job_counts.n + excluded.n"
)
_COUNTS = "INSERT INTO job_counts (job_type, producer, status, n) VALUES {}" + _ADD_COUNT
# PostgreSQL: the event-order lock and the NOTIFY in the events' INSERT, as queuelog does.
_PG_INSERT_EVENT = (
    "WITH ev_lock AS MATERIALIZED (SELECT"
    f" pg_advisory_xact_lock({EVENT_LOCK_KEY}), pg_notify('{NOTIFY_CHANNEL}', '')),"
    " cnt AS (INSERT INTO job_counts (job_type, producer, status, n)"
    " SELECT t, p, s, n FROM ev_lock, (VALUES {}) AS c(t, p, s, n) ORDER BY t, p, s"
    f"{_ADD_COUNT})"
    " INSERT INTO job_events (job_id, job_type, producer, worker_id, previous_status, status,"
    " occurred_at) SELECT ?, ?, ?, ?, ?, ?, ? FROM ev_lock"
)
_RESCUE = (
    "SELECT * FROM jobs WHERE status = 'running' AND lease_expires_at < ?"
    " ORDER BY lease_expires_at LIMIT 100"
)
_PICK = (
    "SELECT id FROM jobs WHERE status = 'pending' AND run_at <= ? AND type IN (?)"
    " ORDER BY priority DESC, run_at, id LIMIT 1"
)
_CLAIM = {
    "sqlite": "UPDATE jobs SET status = 'running', worker_id = ?, claimed_at = ?, updated_at = ?,"
    f" lease_expires_at = ? WHERE id IN ({_PICK}) RETURNING *",
    "postgresql": f"WITH chosen AS ({_PICK} FOR UPDATE SKIP LOCKED)"
    " UPDATE jobs SET status = 'running', worker_id = ?, claimed_at = ?, updated_at = ?,"
    " lease_expires_at = ? FROM chosen WHERE jobs.id = chosen.id AND jobs.status = 'pending'"
    " RETURNING jobs.*",
}
_GET = "SELECT * FROM jobs WHERE id = ?"
_COMPLETE = (
    "UPDATE jobs SET status = 'completed', result = NULL, lease_expires_at = NULL,"
    " finished_at = ?, updated_at = ? WHERE id = ? AND status IN ('running')"
    " AND worker_id = ? AND lease_expires_at > ? RETURNING *"
)


class Raw:
    """The reference: the storage layer's statements on a bare DB-API connection."""

    def __init__(self, url: str, dialect: str) -> None:
        self.dialect = dialect
        self.conn: Any
        if dialect == "sqlite":
            import sqlite3

            self.conn = sqlite3.connect(sqlite_path(url), isolation_level=None)
            for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON"):
                self.conn.execute(f"PRAGMA {pragma}")
        else:
            import psycopg

            self.conn = psycopg.connect(psycopg_url(url), autocommit=True)

    def _sql(self, sql: str) -> str:
        return sql if self.dialect == "sqlite" else sql.replace("?", "%s")

    def _t(self, when: datetime) -> Any:
        # SQLAlchemy stores SQLite datetimes as naive UTC text in this format.
        if self.dialect == "sqlite":
            return when.replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")
        return when

    def _tx(self, body: Callable[[Any], None]) -> None:
        if self.dialect == "sqlite":
            cur = self.conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                body(cur)
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")
            return
        with self.conn.transaction(), self.conn.cursor() as cur:
            body(cur)

    def _event(
        self,
        cur: Any,
        job_id: int,
        job_type: str,
        previous: str | None,
        status: str,
        worker: str | None,
        now: datetime,
    ) -> None:
        counts = sorted({status: 1, **({previous: -1} if previous else {})}.items())
        changes = [v for s, n in counts for v in (job_type, PRODUCER.name, s, n)]
        marks = ", ".join(
            ["(?, ?, ?, ?::BIGINT)" if self.dialect == "postgresql" else "(?, ?, ?, ?)"]
            * len(counts)
        )
        event = (job_id, job_type, PRODUCER.name, worker, previous, status, self._t(now))
        if self.dialect == "sqlite":
            cur.execute(_COUNTS.format(marks), changes)
            cur.execute(_INSERT_EVENT, event)
        else:
            cur.execute(self._sql(_PG_INSERT_EVENT.format(marks)), (*changes, *event))

    def enqueue(self, job_type: str, payload: dict[str, Any]) -> None:
        def body(cur: Any) -> None:
            now = datetime.now(UTC)
            t = self._t(now)
            cur.execute(
                self._sql(_INSERT_JOB),
                (job_type, orjson.dumps(payload).decode(), PRODUCER.name, t, t, t),
            )
            row = cur.fetchone()
            self._event(cur, row[0], job_type, None, "pending", None, now)

        self._tx(body)

    def cycle(self, job_type: str) -> None:
        """Claim the most urgent job of `job_type`, then complete it: two transactions."""
        claimed: list[int] = []

        def claim(cur: Any) -> None:
            now = datetime.now(UTC)
            cur.execute(self._sql(_RESCUE), (self._t(now),))
            cur.fetchall()
            t, lease = self._t(now), self._t(now + LEASE)
            pick = (t, job_type)
            update = (WORKER.name, t, t, lease)
            args = (*update, *pick) if self.dialect == "sqlite" else (*pick, *update)
            cur.execute(self._sql(_CLAIM[self.dialect]), args)
            row = cur.fetchone()
            if row is None:
                raise RuntimeError(f"no pending {job_type} job to claim")
            claimed.append(row[0])
            self._event(cur, row[0], job_type, "pending", "running", WORKER.name, now)

        def complete(cur: Any) -> None:
            now = datetime.now(UTC)
            t = self._t(now)
            cur.execute(self._sql(_GET), (claimed[0],))
            cur.fetchone()
            cur.execute(self._sql(_COMPLETE), (t, t, claimed[0], WORKER.name, t))
            if cur.fetchone() is None:
                raise RuntimeError(f"job {claimed[0]} was not completed")
            self._event(cur, claimed[0], job_type, "running", "completed", WORKER.name, now)

        self._tx(claim)
        self._tx(complete)

    def close(self) -> None:
        self.conn.close()


async def run(url: str, dialect: str, profile: Profile) -> dict[str, Any]:
    """Enqueue/s and claim+complete cycles/s, the service's and the raw driver's, and the
    median of the paired ratios (each service run next to a raw run)."""
    services = open_services(Settings(database_url=url, job_types=("email", "pdf", "sync")))
    migrate(services.db)
    service = services.service
    raw = Raw(url, dialect)
    n = profile.service_ops

    async def svc_enqueue() -> None:
        for i in range(n):
            await service.enqueue(PRODUCER, EnqueueRequest(type="email", payload={"n": i}))

    async def svc_cycle() -> None:
        for _ in range(n):
            (job,) = await service.claim(WORKER, ["email"], None)
            await service.complete(WORKER, job.id, None)

    async def raw_enqueue() -> None:
        for i in range(n):
            raw.enqueue("pdf", {"n": i})

    async def raw_cycle() -> None:
        for _ in range(n):
            raw.cycle("pdf")

    async def rate(fn: Callable[[], Any]) -> float:
        t0 = time.perf_counter()
        await fn()
        return n / (time.perf_counter() - t0)

    out: dict[str, Any] = {}
    try:
        # The enqueue runs leave exactly the jobs the cycle runs then claim.
        for name, svc, ref in (
            ("enqueue", svc_enqueue, raw_enqueue),
            ("cycle", svc_cycle, raw_cycle),
        ):
            svc_rates, raw_rates = [], []
            for _ in range(profile.repeats):
                raw_rates.append(await rate(ref))
                svc_rates.append(await rate(svc))
            out[name] = {
                "service": median(svc_rates),
                "raw": median(raw_rates),
                "ratio": median([s / r for s, r in zip(svc_rates, raw_rates, strict=True)]),
            }
    finally:
        raw.close()
        services.db.close()
    return out
