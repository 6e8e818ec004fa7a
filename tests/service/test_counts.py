"""The job counts (`storage.counts`) that `queueStats` and page totals read agree with the
jobs table after every kind of change: enqueues (one, a batch, idempotent repeats), claims,
completions, failures retried and final, cancellations, admin retries, lease rescues and
retention, run one at a time and concurrently (so that one transaction mixes them)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from queuelog.domain.lifecycle import Status
from queuelog.service import errors, retention
from queuelog.service.jobs import JobService
from queuelog.service.models import Actor, EnqueueRequest, Role
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.scope import Scope
from queuelog.storage.tables import jobs
from queuelog.storage.tx import Tx
from tests.support import Clock

PRODUCERS = [Actor("p1", Role.PRODUCER), Actor("p2", Role.PRODUCER)]
WORKERS = [Actor("w1", Role.WORKER), Actor("w2", Role.WORKER)]
ADMIN = Actor("admin", Role.ADMIN)
TYPES = ["email", "pdf"]
ACTIONS = [
    *("enqueue", "enqueue", "batch", "idempotent", "claim", "claim", "complete", "complete"),
    *("fail", "fail_final", "cancel", "retry", "rescue", "prune"),
]


STATUSES = [s.value for s in Status]


def _disagreements(tx: Tx) -> list[Any]:
    """Every scope and filter where the counters and a count of the table differ."""
    found = []
    for producer in (None, "p1", "p2"):
        for job_type in (None, *TYPES):
            counted = jobs_sql.counts(tx, scope=Scope(producer=producer), job_type=job_type)
            stmt = sa.select(jobs.c.status, sa.func.count()).group_by(jobs.c.status)
            if producer is not None:
                stmt = stmt.where(jobs.c.producer == producer)
            if job_type is not None:
                stmt = stmt.where(jobs.c.type == job_type)
            table = {s: int(n) for s, n in tx.conn.execute(stmt)}
            if counted != {s: table.get(s, 0) for s in STATUSES}:
                found.append((producer, job_type, counted, table))
            for status in STATUSES:
                _, _, total = jobs_sql.page(
                    tx,
                    scope=Scope(producer=producer),
                    status=status,
                    job_type=job_type,
                    first=1,
                    before_id=None,
                )
                if total != table.get(status, 0):
                    found.append((producer, job_type, status, total, table))
    return found


async def _step(svc: JobService, rng: random.Random, clock: Clock) -> None:
    """One random change; refusals (nothing to claim, a job in the wrong state) are fine."""
    producer, worker = rng.choice(PRODUCERS), rng.choice(WORKERS)
    job_type = rng.choice(TYPES)
    ids = await svc.db.read(
        lambda tx: [r.id for r in tx.conn.execute(sa.select(jobs.c.id).order_by(jobs.c.id))]
    )
    some = rng.choice(ids) if ids else 0
    action = rng.choice(ACTIONS)
    try:
        if action == "enqueue":
            await svc.enqueue(producer, EnqueueRequest(job_type, max_retries=rng.randint(0, 2)))
        elif action == "batch":
            await svc.enqueue_many(producer, [EnqueueRequest(t) for t in rng.choices(TYPES, k=5)])
        elif action == "idempotent":
            key = f"k{rng.randint(0, 5)}"
            await svc.enqueue(producer, EnqueueRequest(job_type, idempotency_key=key))
        elif action == "claim":
            await svc.claim(worker, None, rng.choice([1, 60]), limit=rng.randint(1, 3))
        elif action == "complete":
            await svc.complete(worker, some, None)
        elif action in ("fail", "fail_final"):
            await svc.fail(worker, some, "boom", retryable=action == "fail")
        elif action == "cancel":
            await svc.cancel(ADMIN, some)
        elif action == "retry":
            await svc.retry(ADMIN, some)
        elif action == "rescue":
            clock.advance(2)  # past the 1 s leases
            await svc.rescue_expired()
        else:
            clock.advance(86_400 * 40)  # past every retention age
            await retention.prune(svc)
    except errors.DomainError:
        pass


async def test_the_job_counts_agree_with_the_table_after_every_kind_of_change(
    make_service: Callable[..., JobService], clock: Clock
) -> None:
    svc = make_service(backoff_base_seconds=0)
    rng = random.Random(6)
    seen: set[str] = set()
    for round_ in range(12):
        if round_ % 2:
            await asyncio.gather(*(_step(svc, rng, clock) for _ in range(20)))
        else:
            for _ in range(20):
                await _step(svc, rng, clock)
        assert await svc.db.read(_disagreements) == [], f"after round {round_}"
        seen |= await svc.db.read(
            lambda tx: {s for (s,) in tx.conn.execute(sa.select(jobs.c.status).distinct())}
        )
    assert seen == set(STATUSES)  # the mix reached every status
