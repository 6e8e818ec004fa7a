"""JobService: the writes of the queue: enqueues, claims, settlements, leases, retries and
idempotency (its reads are in `service.reads`).

No SQL here and no GraphQL: each write is a transition of `queuelog.lifecycle`, which
storage applies as a compare-and-set; this module decides which transition and its values,
and what to tell a caller whose transition was refused (`service.ownership`). Every job it
returns is shown as its caller may see it (`service.visibility`). Which role may call which
operation is checked once, at the GraphQL edge (`auth.permissions`), before any call here.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from queuelog.config import JobTypeConfig, Settings
from queuelog.lifecycle import (
    COMPLETE,
    COMPLETED,
    FAIL,
    FAIL_AND_RETRY,
    FAILED,
    HEARTBEAT,
    HEARTBEAT_WITH_PROGRESS,
    PENDING,
    RESCUE_AND_FAIL,
    RESCUE_AND_RETRY,
    Status,
    Transition,
)
from queuelog.service import errors, job_types, ownership, validation
from queuelog.service.actions import JobActions
from queuelog.service.backoff import backoff_seconds
from queuelog.service.handoff import Standing, StandingClaims
from queuelog.service.models import Actor, EnqueueRequest, Job
from queuelog.service.observer import Expired, JobObserver
from queuelog.service.reads import JobReads, SharedReads
from queuelog.service.sanitize import sanitize_error
from queuelog.storage import batches
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database
from queuelog.storage.tx import Tx

BATCH_MAX = 500
CLAIM_MAX = 100
RESCUE_BATCH = 100
LEASE_EXPIRED = "lease expired"  # the error a rescued job's attempt records
PROGRESS_MAX_BYTES = 4096
WAIT_MAX_SECONDS = 60
WAIT_MARGIN_SECONDS = 2.0  # a waiting claim answers this long before the execution timeout


def utcnow() -> datetime:
    return datetime.now(UTC)


class JobService(JobActions, JobReads):
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

    # -- producers ----------------------------------------------------------------------

    async def enqueue(self, actor: Actor, req: EnqueueRequest) -> tuple[Job, bool]:
        """Enqueue one job. With an idempotency key already used by this producer for the same
        request, return that job and False."""
        values = self._row(actor, req, ["input"])
        if "idempotency_key" not in values:
            (job,) = await self._insert([values])
            return job, True
        row, created = await self.db.write(jobs_sql.insert_idempotent, values)
        if not created and row.request_hash != values["request_hash"]:
            raise errors.IdempotencyKeyReused(
                "this idempotency key was used before with a different request",
                ["input", "idempotencyKey"],
            )
        job = Job.from_row(row)  # a producer's own job: it may see every field
        if created:
            self.observer.enqueued([job])
        return job, created

    async def enqueue_many(self, actor: Actor, reqs: Sequence[EnqueueRequest]) -> list[Job]:
        """Enqueue 1-500 jobs, all or nothing, returned in input order."""
        if not 1 <= len(reqs) <= BATCH_MAX:
            raise errors.ValidationFailed(f"give 1 to {BATCH_MAX} inputs", ["inputs"])
        now = self.clock()  # one instant for the batch: one transaction, input order kept
        rows = [self._row(actor, r, ["inputs", str(i)], now) for i, r in enumerate(reqs)]
        if all("idempotency_key" not in r for r in rows):
            return await self._insert(rows)
        held = await self.db.write(self._enqueue_many, rows)
        jobs = [Job.from_row(r) for r, _ in held]
        self.observer.enqueued([j for j, (_, created) in zip(jobs, held, strict=True) if created])
        return jobs

    async def _insert(self, rows: list[dict[str, Any]]) -> list[Job]:
        """Insert jobs without idempotency keys. Claims waiting for their types claim in the
        same transaction (`service.handoff`); else it is one INSERT, which concurrent
        batches and enqueues queued meanwhile share."""
        takers = self.standing.take(r["type"] for r in rows if r["run_at"] <= r["created_at"])
        if not takers:
            jobs = [Job.from_row(r) for r in await self.db.write_rows(jobs_sql.insert, rows)]
            self.observer.enqueued(jobs)
            return jobs
        try:
            inserted, claims = await self.db.write(self._insert_and_claim, rows, takers)
            jobs = [Job.from_row(r) for r in inserted]
            handed = {
                j.id: j for s, out in zip(takers, claims, strict=True) for j in self._handed(s, out)
            }
            self.observer.enqueued([handed.get(j.id, j) for j in jobs])
            return jobs
        finally:
            for standing in takers:  # its claim failed, or the enqueue did
                StandingClaims.answer(standing, [])

    def _insert_and_claim(
        self, tx: Tx, rows: list[dict[str, Any]], takers: list[Standing]
    ) -> tuple[list[Any], list[batches.Outcome]]:
        inserted = jobs_sql.insert(tx, rows)
        claims = [
            batches.isolated(
                tx, functools.partial(self._claim, worker=s.actor.name, types=s.types,
                                      lease_seconds=s.lease_seconds, limit=s.limit)
            )
            for s in takers
        ]  # fmt: skip
        return inserted, claims

    def _handed(self, standing: Standing, outcome: batches.Outcome) -> list[Job]:
        """Answer a standing claim with what its claim in an enqueue's transaction found;
        those jobs as they are now (RUNNING)."""
        ok, out = outcome
        if not ok:
            return []  # its worker claims for itself
        expired, rows = out
        if expired:
            self.observer.leases_expired(expired)
        self.observer.claimed(claimed := [Job.from_row(r) for r in rows])
        StandingClaims.answer(standing, [self._shown(standing.actor, r) for r in rows])
        return claimed

    def standing_claim(
        self, actor: Actor, types: Sequence[str] | None, lease_seconds: int | None, limit: int
    ) -> Standing:
        """A claim like `claim(actor, types, lease_seconds, limit)` (which accepted these
        arguments already), to stand in `standing` while it waits."""
        chosen = self.usable_types(actor) if types is None else list(types)
        return Standing(self.standing, actor, chosen, lease_seconds, limit)

    def _row(
        self, actor: Actor, req: EnqueueRequest, prefix: list[str], now: datetime | None = None
    ) -> dict[str, Any]:
        return validation.enqueue(
            actor,
            req,
            now=now or self.clock(),
            configured=self.types,
            payload_limit=self.settings.payload_max_bytes,
            horizon=self.horizon,
            prefix=prefix,
        )

    @staticmethod
    def _enqueue_many(tx: Tx, rows: list[dict[str, Any]]) -> list[tuple[Any, bool]]:
        """Each input's job, in order, and whether this call created it."""
        plain = [r for r in rows if "idempotency_key" not in r]
        keyed = [r for r in rows if "idempotency_key" in r]
        inserted = iter(jobs_sql.insert(tx, plain) if plain else [])
        held = iter(jobs_sql.insert_idempotent_many(tx, keyed) if keyed else [])
        out: list[tuple[Any, bool]] = []
        for i, values in enumerate(rows):
            if "idempotency_key" not in values:
                out.append((next(inserted), True))
                continue
            row, created = next(held)
            if row.request_hash != values["request_hash"]:
                # Raising rolls the whole batch back: all or nothing.
                raise errors.IdempotencyKeyReused(
                    "this idempotency key was used before with a different request",
                    ["inputs", str(i), "idempotencyKey"],
                )
            out.append((row, created))
        return out

    # -- workers ------------------------------------------------------------------------

    async def claim(
        self, actor: Actor, types: Sequence[str] | None, lease_seconds: int | None, limit: int = 1
    ) -> list[Job]:
        """Claim up to `limit` jobs: highest priority first, then the oldest, then lowest id."""
        validation.bounded(limit, 1, CLAIM_MAX, "limit", ["limit"])
        if types is None:
            chosen = self.usable_types(actor)
        else:
            chosen = [validation.job_type(actor, t, self.types, ["types"]).name for t in types]
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

    def usable_types(self, actor: Actor) -> list[str]:
        """The configured types `actor` may use: what a claim of no particular type takes."""
        return [t for t in self.types if actor.may_use_type(t)]

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
        self, tx: Tx, worker: str, types: list[str], lease_seconds: int | None, limit: int
    ) -> tuple[list[Expired], list[Any]]:
        now = self.clock()
        expired = []
        if tx.first("rescue"):  # claims batched together share one rescue
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
            return COMPLETE, {"result": text, "finished_at": now, "updated_at": now}

        again = False  # a repeat answers as the first did, and was counted then

        def repeated(row: Any) -> bool:  # this worker's earlier completeJob succeeded
            nonlocal again
            again = bool(row.status == COMPLETED and row.worker_id == actor.name)
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
            if retryable and row.retry_count < row.max_retries:
                return FAIL_AND_RETRY, self._retry_later(row, now, text)
            return FAIL, {"error": text, "finished_at": now, "updated_at": now}

        again = False  # as in `complete`

        def repeated(row: Any) -> bool:  # this worker's earlier failJob succeeded
            nonlocal again
            again = bool(
                row.status in (PENDING, FAILED)
                and row.worker_id == actor.name
                and row.error is not None
                and row.error != LEASE_EXPIRED
                and (row.status == FAILED or row.claimed_at is None)
            )
            return again

        job = await self.db.write(self._settle, actor, job_id, step, repeated=repeated)
        retried = job.status is Status.PENDING
        if not again:
            self.observer.finished(job, started, retried)
        return job, retried

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
