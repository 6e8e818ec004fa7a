"""6. Peers in the same run, one job at a time, one transaction per operation.

- Embedded: huey's `SqliteStorage` (WAL, fsync on: synchronous=FULL, like queuelog's
  default) enqueues then dequeues; a dequeue deletes the job. queuelog's equivalent of
  taking a job off the queue is a claim; its complete is extra bookkeeping huey does not do,
  so both per-job figures are given: enqueue+claim, and enqueue+claim+complete.
- Server: PgQueuer on the same PostgreSQL: enqueue; dequeue(batch_size=1) then log the job
  as successful, against queuelog's enqueue and claim+complete.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.bench_service import PRODUCER, WORKER
from bench.common import Profile, median, psycopg_url
from queuelog.config import Settings
from queuelog.service.models import EnqueueRequest
from queuelog.services import open_services
from queuelog.storage.migrate import migrate


def _per_job(*rates: float) -> float:
    """Jobs/s when each job goes through every step once (rates in ops/s)."""
    return 1.0 / sum(1.0 / r for r in rates)


async def _queuelog(url: str, n: int, complete: bool) -> dict[str, float]:
    services = open_services(Settings(database_url=url, job_types=("email",)))
    migrate(services.db)
    svc = services.service
    try:
        t0 = time.perf_counter()
        for i in range(n):
            await svc.enqueue(PRODUCER, EnqueueRequest(type="email", payload={"n": i}))
        t1 = time.perf_counter()
        ids = []
        for _ in range(n):
            (job,) = await svc.claim(WORKER, ["email"], None)
            ids.append(job.id)
        t2 = time.perf_counter()
        for job_id in ids if complete else ():
            await svc.complete(WORKER, job_id, None)
        t3 = time.perf_counter()
    finally:
        services.db.close()
    out = {"enqueue": n / (t1 - t0), "claim": n / (t2 - t1)}
    if complete:
        out["complete"] = n / (t3 - t2)
    return out


def _huey(path: Path, n: int) -> dict[str, float]:
    from huey.storage import SqliteStorage  # type: ignore[import-untyped]

    storage = SqliteStorage("bench", filename=str(path), fsync=True)
    payload = b'{"n": 0}'
    t0 = time.perf_counter()
    for _ in range(n):
        storage.enqueue(payload)
    t1 = time.perf_counter()
    for _ in range(n):
        if storage.dequeue() is None:
            raise RuntimeError("huey lost a job")
    t2 = time.perf_counter()
    storage.close()
    return {"enqueue": n / (t1 - t0), "dequeue": n / (t2 - t1)}


async def embedded(sqlite_url: str, workdir: Path, profile: Profile) -> dict[str, Any]:
    """queuelog (service layer, SQLite) against huey's SqliteStorage, interleaved."""
    n = profile.peer_ops
    ours: list[dict[str, float]] = []
    theirs: list[dict[str, float]] = []
    for i in range(profile.repeats):
        theirs.append(_huey(workdir / f"huey-{i}.db", n))
        ours.append(await _queuelog(sqlite_url, n, complete=True))
    q_take = [_per_job(o["enqueue"], o["claim"]) for o in ours]
    q_full = [_per_job(o["enqueue"], o["claim"], o["complete"]) for o in ours]
    h = [_per_job(t["enqueue"], t["dequeue"]) for t in theirs]
    return {
        "huey_enqueue": median([t["enqueue"] for t in theirs]),
        "huey_dequeue": median([t["dequeue"] for t in theirs]),
        "huey_per_job": median(h),
        "queuelog_enqueue": median([o["enqueue"] for o in ours]),
        "queuelog_claim": median([o["claim"] for o in ours]),
        "queuelog_complete": median([o["complete"] for o in ours]),
        "queuelog_take_per_job": median(q_take),
        "queuelog_full_per_job": median(q_full),
        "ratio_take": median([q / t for q, t in zip(q_take, h, strict=True)]),
        "ratio_full": median([q / t for q, t in zip(q_full, h, strict=True)]),
    }


async def _pgqueuer(url: str, n: int) -> dict[str, float]:
    import uuid
    from datetime import timedelta

    import psycopg
    from pgqueuer.db import PsycopgDriver
    from pgqueuer.queries import EntrypointExecutionParameter, Queries

    async with await psycopg.AsyncConnection.connect(psycopg_url(url), autocommit=True) as conn:
        q = Queries(PsycopgDriver(conn))
        if not await q.schema_is_installed():
            await q.install()
        t0 = time.perf_counter()
        for i in range(n):
            await q.enqueue("bench", b'{"n": %d}' % i)
        t1 = time.perf_counter()
        entry = {"bench": EntrypointExecutionParameter(concurrency_limit=0)}
        qm = uuid.uuid4()
        for _ in range(n):
            (job,) = await q.dequeue(1, entry, qm, None, timedelta(seconds=300))  # type: ignore[arg-type]
            await q.log_jobs([(job, "successful", None)])
        t2 = time.perf_counter()
    return {"enqueue": n / (t1 - t0), "cycle": n / (t2 - t1)}


async def server(pg_url: str, pg_url_peer: str, profile: Profile) -> dict[str, Any]:
    """queuelog (service layer, PostgreSQL) against PgQueuer on the same server."""
    n = profile.peer_ops
    ours: list[dict[str, float]] = []
    theirs: list[dict[str, float]] = []
    for _ in range(profile.repeats):
        theirs.append(await _pgqueuer(pg_url_peer, n))
        o = await _queuelog(pg_url, n, complete=True)
        ours.append({"enqueue": o["enqueue"], "cycle": _per_job(o["claim"], o["complete"])})
    out: dict[str, Any] = {}
    for key in ("enqueue", "cycle"):
        out[f"pgqueuer_{key}"] = median([t[key] for t in theirs])
        out[f"queuelog_{key}"] = median([o[key] for o in ours])
        out[f"ratio_{key}"] = median([o[key] / t[key] for o, t in zip(ours, theirs, strict=True)])
    return out
