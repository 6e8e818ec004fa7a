"""6. Peers in the same run, side by side: one job at a time, and each at its best.

- Embedded: huey's `SqliteStorage` against queuelog's service on SQLite. Both files use WAL
  with fsync on (synchronous=FULL: huey's `fsync=True` sets it, queuelog's default; both are
  read back from the connections). A huey dequeue deletes the job; queuelog's claim takes it
  under a lease (and writes an event row) and its complete records the outcome, which huey
  does not, so per-job figures are given both ways: enqueue+claim, and with complete.
- Server: PgQueuer on the same PostgreSQL: enqueue, dequeue, log the job as successful.

"One at a time" is one caller, one job per call. "At best" gives each side its fastest way
to move N jobs: huey from 1, 4 or 16 threads (sharing one storage, as huey's thread workers
do, or with a storage each, as its process workers do); PgQueuer with its batch enqueue,
dequeue and log; queuelog from 32 concurrent asyncio callers (group commit) or in batches of
100 (`enqueue_many`, `claim(limit=100)`, then the batch's completes issued concurrently).
Every phase (enqueue N, take N, complete N) is timed on its own.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.bench_service import PRODUCER, WORKER
from bench.common import Profile, median, psycopg_url
from queuelog.config import Settings
from queuelog.runtime import open_services
from queuelog.service.jobs import JobService
from queuelog.service.models import EnqueueRequest
from queuelog.storage.migrate import migrate

ONE = "one at a time"
HUEY_MODES = {  # name: (threads, one storage shared by the threads)
    "1 thread": (1, True),
    "4 threads, one storage": (4, True),
    "16 threads, one storage": (16, True),
    "4 threads, a storage each": (4, False),
}
QUEUELOG_MODES = {ONE: (1, 1), "32 concurrent callers": (32, 1), "batches of 100": (1, 100)}
PGQUEUER_BATCH = 100


def _per_job(*rates: float) -> float:
    """Jobs/s when each job goes through every step once (rates in ops/s)."""
    return 1.0 / sum(1.0 / r for r in rates)


def _chunks(n: int, size: int) -> list[int]:
    return [min(size, n - i) for i in range(0, n, size)]


def _rates(n: int, *seconds: float) -> list[float]:
    return [n / s for s in seconds]


def _phases(n: int, t0: float, t1: float, t2: float, t3: float) -> dict[str, float]:
    """Rates of n jobs enqueued in t0..t1, taken in t1..t2, completed in t2..t3."""
    enqueue, claim, complete = _rates(n, t1 - t0, t2 - t1, t3 - t2)
    return {
        "enqueue": enqueue,
        "claim": claim,
        "complete": complete,
        "take_per_job": _per_job(enqueue, claim),
        "full_per_job": _per_job(enqueue, claim, complete),
    }


async def _queuelog_run(svc: JobService, n: int, callers: int, batch: int) -> dict[str, float]:
    """Enqueue n jobs, claim them, complete them: `callers` concurrent callers, `batch` jobs
    per enqueue and per claim (a claimed batch's completes go concurrently)."""
    calls = _chunks(n, batch)
    mine = [calls[i::callers] for i in range(callers)]
    claimed: list[list[list[int]]] = [[] for _ in range(callers)]

    async def put(sizes: list[int]) -> None:
        for size in sizes:
            reqs = [EnqueueRequest(type="email", payload={"n": i}) for i in range(size)]
            if batch == 1:
                await svc.enqueue(PRODUCER, reqs[0])
            else:
                await svc.enqueue_many(PRODUCER, reqs)

    async def take(c: int) -> None:
        for size in mine[c]:
            jobs = await svc.claim(WORKER, ["email"], None, size)
            if len(jobs) != size:
                raise RuntimeError(f"claimed {len(jobs)} of {size} pending jobs")
            claimed[c].append([job.id for job in jobs])

    async def done(c: int) -> None:
        for ids in claimed[c]:
            if len(ids) == 1:
                await svc.complete(WORKER, ids[0], None)
            else:
                await asyncio.gather(*(svc.complete(WORKER, i, None) for i in ids))

    t0 = time.perf_counter()
    await asyncio.gather(*(put(m) for m in mine))
    t1 = time.perf_counter()
    await asyncio.gather(*(take(c) for c in range(callers)))
    t2 = time.perf_counter()
    await asyncio.gather(*(done(c) for c in range(callers)))
    t3 = time.perf_counter()
    return _phases(n, t0, t1, t2, t3)


async def _queuelog(url: str, n: int) -> tuple[dict[str, dict[str, float]], str | None]:
    """Every queuelog mode once, and (on SQLite) the writer's synchronous setting."""
    services = open_services(Settings(database_url=url, job_types=("email",)))
    migrate(services.db)
    sync = None
    if services.db.dialect == "sqlite":
        sync = services.db.write_sync(
            lambda tx: str(tx.conn.exec_driver_sql("PRAGMA synchronous").scalar())
        )
    try:
        modes = {
            mode: await _queuelog_run(services.service, n, callers, batch)
            for mode, (callers, batch) in QUEUELOG_MODES.items()
        }
    finally:
        services.db.close()
    return modes, sync


def _in_threads(fn: Callable[[int], None], threads: int) -> float:
    """Seconds to run fn(0) … fn(threads - 1), each in its own thread."""
    if threads == 1:
        t0 = time.perf_counter()
        fn(0)
        return time.perf_counter() - t0
    with ThreadPoolExecutor(threads) as pool:
        t0 = time.perf_counter()
        list(pool.map(fn, range(threads)))
        return time.perf_counter() - t0


def _huey(path: Path, n: int, threads: int, shared: bool) -> dict[str, Any]:
    """Enqueue n jobs from `threads` threads, then dequeue until the queue is empty."""
    from huey.storage import SqliteStorage  # type: ignore[import-untyped]

    def storage() -> Any:
        return SqliteStorage("bench", filename=str(path), fsync=True)

    first = storage()
    stores = [first if shared or i == 0 else storage() for i in range(threads)]
    shares = [len(range(i, n, threads)) for i in range(threads)]
    taken = [0] * threads
    payload = b'{"n": 0}'

    def put(i: int) -> None:
        for _ in range(shares[i]):
            stores[i].enqueue(payload)

    def take(i: int) -> None:
        while stores[i].dequeue() is not None:
            taken[i] += 1

    enqueue, dequeue = _rates(n, _in_threads(put, threads), _in_threads(take, threads))
    if sum(taken) != n:
        raise RuntimeError(f"huey dequeued {sum(taken)} of {n} jobs")
    pragma = first.conn.execute("pragma synchronous").fetchone()[0]
    for s in {id(s): s for s in stores}.values():
        s.close()
    return {
        "enqueue": enqueue,
        "dequeue": dequeue,
        "per_job": _per_job(enqueue, dequeue),
        "synchronous": int(pragma),
    }


def _best(runs: list[dict[str, dict[str, float]]], key: str) -> list[float]:
    """Per repeat, the best figure for `key` over all modes."""
    return [max(modes[m][key] for m in modes) for modes in runs]


def _medians(runs: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, float]]:
    return {m: {k: median([r[m][k] for r in runs]) for k in runs[0][m]} for m in runs[0]}


def _ratios(mine: list[float], theirs: list[float]) -> float:
    return median([m / t for m, t in zip(mine, theirs, strict=True)])


async def embedded(sqlite_url: str, workdir: Path, profile: Profile) -> dict[str, Any]:
    """queuelog (service layer, SQLite) against huey's SqliteStorage, interleaved."""
    n = profile.peer_ops
    ours: list[dict[str, dict[str, float]]] = []
    theirs: list[dict[str, dict[str, Any]]] = []
    synchronous: set[str] = set()
    for i in range(profile.repeats):
        theirs.append(
            {
                mode: _huey(workdir / f"huey-{i}-{j}.db", n, threads, shared)
                for j, (mode, (threads, shared)) in enumerate(HUEY_MODES.items())
            }
        )
        modes, sync = await _queuelog(sqlite_url, n)
        ours.append(modes)
        synchronous |= {f"queuelog {sync}"} | {
            f"huey {h['synchronous']}" for h in theirs[-1].values()
        }
    one = [o[ONE] for o in ours]
    h1 = [t["1 thread"] for t in theirs]
    h_best = {k: _best(theirs, k) for k in ("enqueue", "dequeue", "per_job")}
    return {
        "huey_enqueue": median([t["enqueue"] for t in h1]),
        "huey_dequeue": median([t["dequeue"] for t in h1]),
        "huey_per_job": median([t["per_job"] for t in h1]),
        "queuelog_enqueue": median([o["enqueue"] for o in one]),
        "queuelog_claim": median([o["claim"] for o in one]),
        "queuelog_complete": median([o["complete"] for o in one]),
        "queuelog_take_per_job": median([o["take_per_job"] for o in one]),
        "queuelog_full_per_job": median([o["full_per_job"] for o in one]),
        "ratio_take": _ratios([o["take_per_job"] for o in one], [t["per_job"] for t in h1]),
        "ratio_full": _ratios([o["full_per_job"] for o in one], [t["per_job"] for t in h1]),
        "synchronous": sorted(synchronous),
        "best": {
            "huey": _medians(theirs),
            "huey_best": {k: median(v) for k, v in h_best.items()},
            "queuelog": _medians(ours),
            "ratios": {
                mode: {
                    "enqueue": _ratios([o[mode]["enqueue"] for o in ours], h_best["enqueue"]),
                    "claim": _ratios([o[mode]["claim"] for o in ours], h_best["dequeue"]),
                    "take_per_job": _ratios(
                        [o[mode]["take_per_job"] for o in ours], h_best["per_job"]
                    ),
                    "full_per_job": _ratios(
                        [o[mode]["full_per_job"] for o in ours], h_best["per_job"]
                    ),
                }
                for mode in QUEUELOG_MODES
            },
        },
    }


@asynccontextmanager
async def _pgqueuer_queries(url: str) -> AsyncIterator[Any]:
    import psycopg
    from pgqueuer.db import PsycopgDriver
    from pgqueuer.queries import Queries

    async with await psycopg.AsyncConnection.connect(psycopg_url(url), autocommit=True) as conn:
        q = Queries(PsycopgDriver(conn))
        if not await q.schema_is_installed():
            await q.install()
        yield q


def _entry() -> Any:
    from pgqueuer.queries import EntrypointExecutionParameter

    return {"bench": EntrypointExecutionParameter(concurrency_limit=0)}


async def _pgqueuer(url: str, n: int) -> dict[str, float]:
    """One job at a time: enqueue n, then dequeue one and log it successful, n times."""
    async with _pgqueuer_queries(url) as q:
        t0 = time.perf_counter()
        for i in range(n):
            await q.enqueue("bench", b'{"n": %d}' % i)
        t1 = time.perf_counter()
        entry, qm = _entry(), uuid.uuid4()
        for _ in range(n):
            (job,) = await q.dequeue(1, entry, qm, None, timedelta(seconds=300))
            await q.log_jobs([(job, "successful", None)])
        t2 = time.perf_counter()
    return {"enqueue": n / (t1 - t0), "cycle": n / (t2 - t1)}


async def _pgqueuer_batches(url: str, n: int) -> dict[str, float]:
    """PgQueuer at its best: batch enqueue, batch dequeue, batch log, 100 jobs a call."""
    async with _pgqueuer_queries(url) as q:
        sizes = _chunks(n, PGQUEUER_BATCH)
        entry, qm = _entry(), uuid.uuid4()
        t0 = time.perf_counter()
        for size in sizes:
            await q.enqueue(["bench"] * size, [b'{"n": 0}'] * size, [0] * size)
        t1 = time.perf_counter()
        batches = [await q.dequeue(size, entry, qm, None, timedelta(seconds=300)) for size in sizes]
        t2 = time.perf_counter()
        for jobs in batches:
            await q.log_jobs([(job, "successful", None) for job in jobs])
        t3 = time.perf_counter()
    if sum(map(len, batches)) != n:
        raise RuntimeError(f"PgQueuer dequeued {sum(map(len, batches))} of {n} jobs")
    return _phases(n, t0, t1, t2, t3)


async def server(pg_url: str, pg_url_peer: str, profile: Profile) -> dict[str, Any]:
    """queuelog (service layer, PostgreSQL) against PgQueuer on the same server."""
    n = profile.peer_ops
    ours: list[dict[str, dict[str, float]]] = []
    theirs: list[dict[str, float]] = []
    batched: list[dict[str, float]] = []
    for _ in range(profile.repeats):
        theirs.append(await _pgqueuer(pg_url_peer, n))
        batched.append(await _pgqueuer_batches(pg_url_peer, n))
        ours.append((await _queuelog(pg_url, n))[0])
    one = [{"enqueue": o[ONE]["enqueue"], "cycle": _per_job(o[ONE]["claim"], o[ONE]["complete"])}
           for o in ours]  # fmt: skip
    out: dict[str, Any] = {}
    for key in ("enqueue", "cycle"):
        out[f"pgqueuer_{key}"] = median([t[key] for t in theirs])
        out[f"queuelog_{key}"] = median([o[key] for o in one])
        out[f"ratio_{key}"] = _ratios([o[key] for o in one], [t[key] for t in theirs])
    keys = ("enqueue", "claim", "complete", "take_per_job", "full_per_job")
    out["best"] = {
        "pgqueuer": {k: median([b[k] for b in batched]) for k in keys},
        "queuelog": _medians(ours),
        "ratios": {
            mode: {k: _ratios([o[mode][k] for o in ours], [b[k] for b in batched]) for k in keys}
            for mode in QUEUELOG_MODES
        },
    }
    return out
