"""JobEnqueues: how jobs enter the queue, one or a batch, with or without an idempotency
key; and the hand-off of new jobs to claims waiting for them (`service.handoff`). A part of
`JobService`."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from queuelog.config import JobTypeConfig, Settings
from queuelog.service import errors, validation
from queuelog.service.handoff import Standing, StandingClaims
from queuelog.service.models import Actor, EnqueueRequest, Job
from queuelog.service.observer import Expired, JobObserver
from queuelog.service.visibility import shown
from queuelog.storage import batches
from queuelog.storage import jobs as jobs_sql
from queuelog.storage import keys as keys_sql
from queuelog.storage.db import Database
from queuelog.storage.tx import Tx

BATCH_MAX = 500


class JobEnqueues:
    db: Database
    clock: Callable[[], datetime]
    settings: Settings
    types: dict[str, JobTypeConfig]
    horizon: timedelta
    observer: JobObserver
    standing: StandingClaims
    # The claim a worker's request makes, in a transaction (`JobService._claim`).
    _claim: Callable[..., tuple[list[Expired], list[Any]]]

    def usable_types(self, actor: Actor) -> list[str]:
        """The configured types `actor` may use: what a claim of no particular type takes."""
        return [t for t in self.types if actor.may_use_type(t)]

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
        """The rows, then each taker's claim under a savepoint of its own: a claim that
        fails costs only itself. They rescue no expired lease (a statement the new job's
        way to its worker need not wait for: the next claim of its own, or the maintenance
        loop, takes those back). A taker whose key was revoked, by whatever process, before
        this transaction gets nothing."""
        inserted = jobs_sql.insert(tx, rows)
        live = keys_sql.live_names(tx, {s.actor.name for s in takers})
        claims = [
            batches.isolated(
                tx, functools.partial(self._claim, worker=s.actor.name, types=s.types,
                                      lease_seconds=s.lease_seconds, limit=s.limit,
                                      rescue=False)
            )
            if s.actor.name in live else (False, PermissionError("its key was revoked"))
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
        StandingClaims.answer(standing, [shown(standing.actor, Job.from_row(r)) for r in rows])
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
