"""4. Claim latency through the service at a backlog of 1k, 100k and 1M pending jobs.

Each backlog size has its own database, opened and migrated at the start, and the sizes are
measured interleaved: repeat 1 of every size (smallest to largest), then repeat 2, and so
on, so that the machine changing speed over the minutes a run takes falls on every size
alike. The headline ratio is the median over repeats of the paired ratio: the largest
size's p50 over the smallest size's p50 of the same repeat.

Each backlog is bulk-loaded with raw SQL (executemany on SQLite, COPY on PostgreSQL) with
mixed priorities and run_at times spread over the past day, and never ANALYZEd: each
database's worker first claims from the empty queue, so its statements are prepared and
planned while the table is empty, and the backlog then arrives as a burst would, before
autovacuum. (A claim whose plan kept the table's size from when it was small read every
job: 3 ms a claim at 20k jobs.) Every database is loaded before the first timed run, and
before each timed run its backlog is topped back up to its size (untimed); each claimed job
is completed (untimed) so the running set stays small.

Then, in each repeat, behind the largest backlog (all "email" jobs, in the largest size's
database), a worker claims another type: one "sync" job is enqueued (untimed), claimed
(timed) and completed, again and again. The claim index leads with the type, so this must
cost what a claim at a small backlog costs; its ratio is likewise paired with the smallest
size's p50 of the same repeat.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import Profile, database_url, median, percentile, psycopg_url, sqlite_path
from queuelog.config import Settings
from queuelog.runtime import Services, open_services
from queuelog.service.jobs import JobService
from queuelog.service.models import Actor, EnqueueRequest, Role
from queuelog.storage.migrate import migrate

WORKER = Actor("bench-worker", Role.WORKER)
PRODUCER = Actor("bench-producer", Role.PRODUCER)
EMPTY_CLAIMS = 10
COLUMNS = (
    "type, payload, priority, status, retry_count, max_retries, producer,"
    " run_at, created_at, updated_at"
)


def _rows(n: int, rng: random.Random, keys: int) -> Iterator[tuple[Any, ...]]:
    now = datetime.now(UTC)
    for i in range(n):
        when = now - timedelta(seconds=rng.uniform(60, 86_400))
        key = (f"k{rng.randrange(keys)}",) if keys else ()
        yield ("email", f'{{"n": {i}}}', rng.choice((0, 10, 20, 30)), "pending", 0, 3,
               "bench-producer", when, when, when, *key)  # fmt: skip


def _columns(keys: int) -> str:
    return COLUMNS + (", concurrency_key" if keys else "")


def _load_sqlite(url: str, n: int, rng: random.Random, keys: int = 0) -> None:
    import sqlite3

    conn = sqlite3.connect(sqlite_path(url), isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        marks = ", ".join("?" * (11 if keys else 10))
        sql = f"INSERT INTO jobs ({_columns(keys)}) VALUES ({marks})"
        fmt = "%Y-%m-%d %H:%M:%S.%f"  # SQLAlchemy's SQLite datetime text, naive UTC
        conn.executemany(
            sql,
            (
                (*r[:7], *(t.replace(tzinfo=None).strftime(fmt) for t in r[7:10]), *r[10:])
                for r in _rows(n, rng, keys)
            ),
        )
        conn.execute("COMMIT")
    finally:
        conn.close()


def _load_postgres(url: str, n: int, rng: random.Random, keys: int = 0) -> None:
    import psycopg

    with psycopg.connect(psycopg_url(url)) as conn:
        with conn.cursor() as cur, cur.copy(f"COPY jobs ({_columns(keys)}) FROM STDIN") as copy:
            for row in _rows(n, rng, keys):
                copy.write_row(row)
        conn.commit()


def load(backend: str, url: str, n: int, rng: random.Random, keys: int = 0) -> None:
    """Bulk-load `n` pending "email" jobs (with `keys` > 0: each with one of that many
    concurrency keys, at random)."""
    (_load_sqlite if backend == "sqlite" else _load_postgres)(url, n, rng, keys)


def pending(url: str, backend: str) -> int:
    sql = "SELECT count(*) FROM jobs WHERE status = 'pending'"
    if backend == "sqlite":
        import sqlite3

        with sqlite3.connect(sqlite_path(url)) as conn:
            return int(conn.execute(sql).fetchone()[0])
    import psycopg

    with psycopg.connect(psycopg_url(url)) as conn:
        row = conn.execute(sql).fetchone()
        assert row is not None
        return int(row[0])


@dataclass(slots=True)
class _Backlog:
    """One backlog size: its database, its services, and what its runs measured."""

    size: int
    url: str
    services: Services
    p50s: list[float] = field(default_factory=list)  # ms, one per repeat
    p99s: list[float] = field(default_factory=list)
    load_s: float = 0.0

    def top_up(self, backend: str, rng: random.Random) -> None:
        t0 = time.perf_counter()
        load(backend, self.url, self.size - pending(self.url, backend), rng)
        self.load_s += time.perf_counter() - t0


async def run(backend: str, workdir: Path, profile: Profile) -> dict[str, Any]:
    """For each backlog size: the median over repeats of each run's p50 and p99 claim
    latency (ms), and the total load time; `ratio`: the median of the per-repeat paired
    ratios, largest size's p50 over smallest size's p50."""
    rng = random.Random(6)
    backlogs: list[_Backlog] = []
    other_p50s: list[float] = []
    other_p99s: list[float] = []
    with ExitStack() as stack:
        for size in profile.backlogs:
            url = stack.enter_context(database_url(backend, workdir))
            services = open_services(Settings(database_url=url, job_types=("email", "sync")))
            stack.callback(services.db.close)  # runs before its database is dropped
            backlogs.append(_Backlog(size, url, services))
            migrate(services.db)
            for _ in range(EMPTY_CLAIMS):  # psycopg prepares from the fifth
                assert await services.service.claim(WORKER, ["email"], None) == []
        for b in backlogs:
            b.top_up(backend, rng)
        for _ in range(profile.repeats):
            for b in backlogs:
                b.top_up(backend, rng)
                took = await timed_claims(b.services.service, "email", profile.claims)
                b.p50s.append(percentile(took, 50) * 1e3)
                b.p99s.append(percentile(took, 99) * 1e3)
            largest = backlogs[-1].services.service
            took = await timed_claims(largest, "sync", profile.claims, _enqueue_sync)
            other_p50s.append(percentile(took, 50) * 1e3)
            other_p99s.append(percentile(took, 99) * 1e3)
    out: dict[str, Any] = {
        str(b.size): {"p50_ms": median(b.p50s), "p99_ms": median(b.p99s), "load_s": b.load_s}
        for b in backlogs
    }
    first, last = backlogs[0], backlogs[-1]
    ratios = paired(last.p50s, first.p50s)
    other_ratios = paired(other_p50s, first.p50s)
    out["ratio"] = median(ratios)
    out["ratios"] = ratios
    out["other_type"] = {
        "p50_ms": median(other_p50s),
        "p99_ms": median(other_p99s),
        "behind": last.size,
        "ratio": median(other_ratios),
        "ratios": other_ratios,
    }
    return out


def paired(mine: list[float], reference: list[float]) -> list[float]:
    return [m / r for m, r in zip(mine, reference, strict=True)]


async def _enqueue_sync(service: JobService) -> None:
    await service.enqueue(PRODUCER, EnqueueRequest("sync"))


async def timed_claims(
    service: JobService,
    job_type: str,
    n: int,
    before: Callable[[JobService], Awaitable[None]] | None = None,
) -> list[float]:
    """`n` claims of one `job_type` job each, timed (seconds); each claimed job is then
    completed, untimed. `before` (untimed) runs ahead of each claim."""
    took = []
    for _ in range(n):
        if before is not None:
            await before(service)
        t0 = time.perf_counter()
        (job,) = await service.claim(WORKER, [job_type], None)
        took.append(time.perf_counter() - t0)
        await service.complete(WORKER, job.id, None)
    return took
