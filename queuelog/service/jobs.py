"""JobService: the writes of the queue: enqueues, claims, settlements, leases, retries and
idempotency (its reads are in `service.reads`).

No SQL here and no GraphQL: each write is a transition of `queuelog.domain.lifecycle`, which
storage applies as a compare-and-set; this module decides which transition and its values,
and what to tell a caller whose transition was refused (`service.ownership`). Every job it
returns is shown as its caller may see it (`service.visibility`). Which role may call which
operation is checked once, at the GraphQL edge (`auth.permissions`), before any call here.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from queuelog.config import JobTypeConfig, Settings
from queuelog.domain.lifecycle import (
    COMPLETE,
    FAIL,
    FAIL_AND_RETRY,
    HEARTBEAT,
    HEARTBEAT_WITH_PROGRESS,
    RESCUE_AND_FAIL,
    RESCUE_AND_RETRY,
    Status,
    Transition,
)
from queuelog.service import job_types, ownership, validation
from queuelog.service.actions import JobActions
from queuelog.service.backoff import backoff_seconds
from queuelog.service.enqueues import JobEnqueues
from queuelog.service.handoff import StandingClaims
from queuelog.service.models import Actor, Job
from queuelog.service.observer import Expired, JobObserver
from queuelog.service.ownership import LEASE_EXPIRED
from queuelog.service.reads import JobReads, SharedReads
from queuelog.service.reports import JobReports
from queuelog.service.sanitize import sanitize_error
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database
from queuelog.storage.tx import Tx

CLAIM_MAX = 100
RESCUE_BATCH = 100
PROGRESS_MAX_BYTES = 4096
WAIT_MAX_SECONDS = 60
WAIT_MARGIN_SECONDS = 2.0  # a waiting claim answers this long before the execution timeout


def utcnow() -> datetime:
    return datetime.now(UTC)


class JobService(JobEnqueues, JobActions, JobReports, JobReads):
    def __init__(
        self,
        db: Database,
        settings: Settings,
        *,
        clock: Callable[[], datetime] = utcnow,
        rand: random.Random | None = None,
    ) -> None:
        self.db = db
        self.shared = SharedReads(db)
        self.settings = settings
        self.types: dict[str, JobTypeConfig] = settings.type_configs()
        self.clock = clock
        self.rand = rand or random.Random()
        self.horizon = timedelta(days=settings.schedule_horizon_days)
        self.observer = JobObserver()  # told what each write did, after its commit
        self.limited_hint = job_types.LimitedHint(db, list(self.types))
        self.standing = StandingClaims()  # claims waiting for jobs, for enqueues to hand off

    # -- workers ------------------------------------------------------------------------

    async def claim(
        self, actor: Actor, types: Sequence[str] | None, lease_seconds: int | None, limit: int = 1
    ) -> list[Job]:
        """Claim up to `limit` jobs: highest priority first, then the oldest, then lowest id."""
        validation.bounded(limit, 1, CLAIM_MAX, "limit", ["limit"])
        asked = validation.claim_types(types, ["types"])
        if asked is None:
            chosen = self.usable_types(actor)
        else:
            chosen = [validation.job_type(actor, t, self.types, ["types"]).name for t in asked]
        self._check_lease(lease_seconds)
        if not chosen:
            return []
        await self.limited_hint.read()
        expired, rows = await self.db.write(self._claim, actor.name, chosen, lease_seconds, limit)
        jobs = [self._shown(actor, r) for r in rows]
        if expired:
            self.observer.leases_expired(expired)
        self.observer.claimed(jobs)
        return jobs

    def claim_wait(self, seconds: int | None) -> float:
        """How long a claim may wait for a job (`waitSeconds`, 0 to 60): never so long that
        the request's execution timeout cuts it off after it claimed something."""
        validation.bounded(seconds or 0, 0, WAIT_MAX_SECONDS, "waitSeconds", ["waitSeconds"])
        limit = self.settings.execution_timeout_seconds - WAIT_MARGIN_SECONDS
        return max(0.0, min(float(seconds or 0), limit))

    def _check_lease(self, seconds: int | None) -> None:
        if seconds is not None:
            limit = self.settings.max_lease_seconds
            validation.bounded(seconds, 1, limit, "leaseSeconds", ["leaseSeconds"])

    def _claim(
        self,
        tx: Tx,
        worker: str,
        types: list[str],
        lease_seconds: int | None,
        limit: int,
        rescue: bool = True,
    ) -> tuple[list[Expired], list[Any]]:
        """Claim in `tx`; with `rescue`, first take back expired leases (once a transaction:
        claims batched together share one rescue)."""
        now = self.clock()
        expired = []
        if rescue and tx.first("rescue"):
            expired = self._rescue(tx, now)
        lease_until = {
            t: now + timedelta(seconds=lease_seconds or self.types[t].lease_seconds) for t in types
        }
        rows = job_types.claim(  # paused types skipped, limited ones within their limits
            tx,
            worker=worker,
            now=now,
            types=types,
            limit=limit,
            lease_until=lease_until,
            limited_hint=self.limited_hint.fresh(),
        )
        return expired, rows

    async def heartbeat(
        self, actor: Actor, job_id: int, lease_seconds: int | None, progress: Any = None
    ) -> Job:
        """Extend the holder's lease; a `progress` report (JSON, not null) is stored too."""
        self._check_lease(lease_seconds)
        text = None
        if progress is not None:
            text = validation.serialize(progress, PROGRESS_MAX_BYTES, ["progress"], "progress")

        def step(row: Any, now: datetime) -> tuple[Transition, dict[str, Any]]:
            seconds = lease_seconds or self._type(row.type).lease_seconds
            values = {"lease_expires_at": now + timedelta(seconds=seconds), "updated_at": now}
            if text is None:
                return HEARTBEAT, values
            return HEARTBEAT_WITH_PROGRESS, {**values, "progress": text, "progress_at": now}

        return await self.db.write(self._settle, actor, job_id, step)

    async def complete(self, actor: Actor, job_id: int, result: Any) -> Job:
        text = None
        if result is not None:
            text = validation.serialize(
                result, self.settings.payload_max_bytes, ["result"], "result"
            )

        def step(_row: Any, now: datetime) -> tuple[Transition, dict[str, Any]]:
            return COMPLETE, self._completion(text, now)

        again = False  # a repeat answers as the first did, and was counted then

        def repeated(row: Any) -> bool:
            nonlocal again
            again = ownership.completed_before(actor, row)
            return again

        job = await self.db.write(
            self._settle, actor, job_id, step, by_row=False, repeated=repeated
        )
        if not again:
            self.observer.finished(job, job.claimed_at, retried=False)
        return job

    async def fail(
        self, actor: Actor, job_id: int, error: str, retryable: bool = True
    ) -> tuple[Job, bool]:
        """Record a failed attempt: back to PENDING after a backoff while retries remain (and
        the worker says the failure is retryable), else FAILED. Returns the job and whether
        it will be retried."""
        text = sanitize_error(error, self.settings.error_max_chars)
        started: datetime | None = None

        def step(row: Any, now: datetime) -> tuple[Transition, dict[str, Any]]:
            nonlocal started
            started = row.claimed_at  # a retry clears it
            return self._failure(row, now, text, retryable)

        again = False  # as in `complete`

        def repeated(row: Any) -> bool:
            nonlocal again
            again = ownership.failed_before(actor, row)
            return again

        job = await self.db.write(self._settle, actor, job_id, step, repeated=repeated)
        retried = job.status is Status.PENDING
        if not again:
            self.observer.finished(job, started, retried)
        return job, retried

    def _completion(self, result: str | None, now: datetime) -> dict[str, Any]:
        """The values of COMPLETE: the serialized `result`, finished `now`."""
        return {"result": result, "finished_at": now, "updated_at": now}

    def _failure(
        self, row: Any, now: datetime, error: str, retryable: bool
    ) -> tuple[Transition, dict[str, Any]]:
        """The transition of a failed attempt of the job `row` and its values: back to
        PENDING after a backoff while retries remain and the worker says it may, else
        FAILED."""
        if retryable and row.retry_count < row.max_retries:
            return FAIL_AND_RETRY, self._retry_later(row, now, error)
        return FAIL, {"error": error, "finished_at": now, "updated_at": now}

    def _retry_later(self, row: Any, now: datetime, error: str) -> dict[str, Any]:
        """The values of a failed attempt that will be retried after a backoff."""
        cfg = self._type(row.type)
        delay = backoff_seconds(
            row.retry_count, cfg.backoff_base_seconds, cfg.backoff_max_seconds, self.rand
        )
        return {
            "retry_count": row.retry_count + 1,
            "error": error,
            "run_at": now + timedelta(seconds=delay),
            "updated_at": now,
        }

    def _type(self, name: str) -> JobTypeConfig:
        # A job of a type no longer configured still gets the server's defaults.
        return self.types.get(name) or JobTypeConfig(
            name,
            self.settings.default_lease_seconds,
            self.settings.backoff_base_seconds,
            self.settings.backoff_max_seconds,
        )

    def _settle(
        self,
        tx: Tx,
        actor: Actor,
        job_id: int,
        step: Callable[[Any, datetime], tuple[Transition, dict[str, Any]]],
        *,
        by_row: bool = True,
        repeated: Callable[[Any], bool] | None = None,
    ) -> Job:
        """Apply a holder-only transition (`step` picks it and its values): only the worker
        holding a live lease may. When they do not depend on the row (`by_row` False, `step`
        gets None), the compare-and-set, which checks the holder itself, goes first, and the
        row is read only to explain a refusal: one statement fewer for every complete."""
        now = self.clock()
        if by_row:
            row = jobs_sql.get(tx, job_id)
            if row is None or not ownership.holds(actor, row, now):
                return self._refused(tx, actor, job_id, row, repeated)
            transition, values = step(row, now)
        else:
            transition, values = step(None, now)
        done = jobs_sql.apply(tx, transition, job_id, values, worker=actor.name, at=now)
        if done is not None:
            return self._shown(actor, done)
        return self._refused(tx, actor, job_id, jobs_sql.get(tx, job_id), repeated)

    def _refused(
        self, tx: Tx, actor: Actor, job_id: int, row: Any, repeated: Callable[[Any], bool] | None
    ) -> Job:
        """The answer to a report the job's state refused: as the first answer when the
        same worker's identical report went through before (its answer may have been
        lost), else the refusal."""
        if row is not None and repeated is not None and repeated(row):
            return self._shown(actor, row)
        raise ownership.refusal(tx, actor, row, job_id)

    async def release(self, actor: Actor, job_ids: Sequence[int]) -> int:
        """Give back jobs a claim took whose answer could not be delivered."""
        return await self.db.write(lambda tx: ownership.release(tx, actor, job_ids, self.clock()))

    # -- leases -------------------------------------------------------------------------

    async def rescue_expired(self) -> int:
        """Give back every job whose lease has expired; returns how many were rescued."""
        total = 0
        while True:
            expired = await self.db.write(lambda tx: self._rescue(tx, self.clock()))
            if expired:
                self.observer.leases_expired(expired)
            total += len(expired)
            if len(expired) < RESCUE_BATCH:
                return total

    def _rescue(self, tx: Tx, now: datetime) -> list[Expired]:
        rows = jobs_sql.expired_leases(tx, now, RESCUE_BATCH)
        rescued = []
        for row in rows:
            retried = row.retry_count < row.max_retries
            if retried:
                transition = RESCUE_AND_RETRY
                values = self._retry_later(row, now, LEASE_EXPIRED)
            else:
                transition = RESCUE_AND_FAIL
                values = {"error": LEASE_EXPIRED, "finished_at": now, "updated_at": now}
            # The rows are locked (PostgreSQL) or the write lock is held (SQLite): the
            # compare-and-set cannot miss, but a rescue is counted only when it happened.
            if jobs_sql.apply(tx, transition, row.id, values, at=now):
                rescued.append(Expired(row.type, retried))
        return rescued
