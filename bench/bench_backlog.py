"""4. Claim latency through the service at a backlog of 1k, 100k and 1M pending jobs.

The backlog is bulk-loaded with raw SQL (executemany on SQLite, COPY on PostgreSQL) with
mixed priorities and run_at times spread over the past day, and never ANALYZEd: the worker
first claims from the empty queue, so its statements are prepared and planned while the
table is empty, and each backlog then arrives as a burst would, before autovacuum. (A claim
whose plan kept the table's size from when it was small read every job: 3 ms a claim at
20k jobs.) Before each timed run the backlog is topped back up to its size; each claimed
job is completed (untimed) so the running set stays small.

Then, behind the largest backlog (all "email" jobs), a worker claims another type: one
"sync" job is enqueued (untimed), claimed (timed) and completed, again and again. The claim
index leads with the type, so this must cost what a claim at a small backlog costs.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.common import Profile, median, percentile, psycopg_url, sqlite_path
from queuelog.config import Settings
from queuelog.service.models import Actor, EnqueueRequest, Role
from queuelog.services import open_services
from queuelog.storage.migrate import migrate

WORKER = Actor("bench-worker", Role.WORKER)
EMPTY_CLAIMS = 10
CHUNK = 50_000
COLUMNS = (
    "type, payload, priority, status, retry_count, max_retries, producer,"
    " run_at, created_at, updated_at"
)


def _rows(n: int, rng: random.Random) -> Iterator[tuple[Any, ...]]:
    now = datetime.now(UTC)
    for i in range(n):
        when = now - timedelta(seconds=rng.uniform(60, 86_400))
        yield ("email", f'{{"n": {i}}}', rng.choice((0, 10, 20, 30)), "pending", 0, 3,
               "bench-producer", when, when, when)  # fmt: skip


def _load_sqlite(url: str, n: int, rng: random.Random) -> None:
    import sqlite3

    conn = sqlite3.connect(sqlite_path(url), isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        sql = f"INSERT INTO jobs ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        fmt = "%Y-%m-%d %H:%M:%S.%f"  # SQLAlchemy's SQLite datetime text, naive UTC
        conn.executemany(
            sql,
            (
                (*r[:7], *(t.replace(tzinfo=None).strftime(fmt) for t in r[7:]))
                for r in _rows(n, rng)
            ),
        )
        conn.execute("COMMIT")
    finally:
        conn.close()


def _load_postgres(url: str, n: int, rng: random.Random) -> None:
    import psycopg

    with psycopg.connect(psycopg_url(url)) as conn:
        with conn.cursor() as cur, cur.copy(f"COPY jobs ({COLUMNS}) FROM STDIN") as copy:
            for row in _rows(n, rng):
                copy.write_row(row)
        conn.commit()


def _pending(url: str, dialect: str) -> int:
    sql = "SELECT count(*) FROM jobs WHERE status = 'pending'"
    if dialect == "sqlite":
        import sqlite3

        with sqlite3.connect(sqlite_path(url)) as conn:
            return int(conn.execute(sql).fetchone()[0])
    import psycopg

    with psycopg.connect(psycopg_url(url)) as conn:
        row = conn.execute(sql).fetchone()
        assert row is not None
        return int(row[0])


async def run(url: str, dialect: str, profile: Profile) -> dict[str, Any]:
    """For each backlog size: the median over repeats of each run's p50 and p99 claim
    latency (ms), and the load time."""
    services = open_services(Settings(database_url=url, job_types=("email", "sync")))
    migrate(services.db)
    service = services.service
    load = _load_sqlite if dialect == "sqlite" else _load_postgres
    rng = random.Random(6)
    out: dict[str, Any] = {}
    try:
        for _ in range(EMPTY_CLAIMS):  # psycopg prepares from the fifth
            assert await service.claim(WORKER, ["email"], None) == []
        for size in profile.backlogs:
            p50s, p99s, load_seconds = [], [], 0.0
            for _ in range(profile.repeats):
                missing = size - _pending(url, dialect)
                t0 = time.perf_counter()
                load(url, missing, rng)
                load_seconds += time.perf_counter() - t0
                took = []
                for _ in range(profile.claims):
                    t0 = time.perf_counter()
                    (job,) = await service.claim(WORKER, ["email"], None)
                    took.append(time.perf_counter() - t0)
                    await service.complete(WORKER, job.id, None)
                p50s.append(percentile(took, 50) * 1e3)
                p99s.append(percentile(took, 99) * 1e3)
            out[str(size)] = {
                "p50_ms": median(p50s),
                "p99_ms": median(p99s),
                "load_s": load_seconds,
            }
        out["other_type"] = await _other_type(service, profile)
    finally:
        services.db.close()
    first, last = str(profile.backlogs[0]), str(profile.backlogs[-1])
    out["ratio"] = out[last]["p50_ms"] / out[first]["p50_ms"]
    out["other_type"]["behind"] = profile.backlogs[-1]
    out["other_type"]["ratio"] = out["other_type"]["p50_ms"] / out[first]["p50_ms"]
    return out


async def _other_type(service: Any, profile: Profile) -> dict[str, Any]:
    producer = Actor("bench-producer", Role.PRODUCER)
    p50s, p99s = [], []
    for _ in range(profile.repeats):
        took = []
        for _ in range(profile.claims):
            await service.enqueue(producer, EnqueueRequest("sync"))
            t0 = time.perf_counter()
            (job,) = await service.claim(WORKER, ["sync"], None)
            took.append(time.perf_counter() - t0)
            await service.complete(WORKER, job.id, None)
        p50s.append(percentile(took, 50) * 1e3)
        p99s.append(percentile(took, 99) * 1e3)
    return {"p50_ms": median(p50s), "p99_ms": median(p99s)}
