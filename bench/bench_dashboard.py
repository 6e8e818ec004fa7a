"""10. The dashboard's queries against 1,000,000 jobs, through a live server over HTTP.

The jobs are bulk-loaded with raw SQL (executemany in one transaction on SQLite, COPY on
PostgreSQL) into a migrated database: ten job types of skewed popularity, twenty producers,
fifty workers, every status, an idempotency key on a third of them, creation times spread
over the last day (ids in creation order), payloads like {"customer": n % 1000, "plan": …}.
Each job has one event, its latest change, at its time: as many events as jobs over the day
(what throughput reads). The job counts are set from the rows, then every table ANALYZEd
(on PostgreSQL VACUUM ANALYZE, as autovacuum leaves a settled table). The events are then
rolled up into per-minute counts as the maintenance loop does it, batch after batch
(`rollup_s`), so that throughput over the day (from a whole minute) reads the rollups.

Each query is sent once untimed, then `repeats` times timed (client-side wall time of the
HTTP request): p50 and max, as an admin and as one of the producers (who sees only its own
jobs). A list reads the first page of 50 without `totalCount`; a later page follows
`endCursor` four pages deep; `totalCount` (what a bulk action's confirmation shows) is
timed on its own, since beyond statuses, types and a producer it counts every matching row.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from bench.common import ADMIN_SECRET, database_url, median, psycopg_url, sqlite_path
from queuelog.service.throughput import ROLLUP_BATCH
from queuelog.storage import rollups as rollups_sql
from queuelog.storage.db import Database
from queuelog.storage.migrate import migrate
from tests.server import ServerProcess

TYPES: tuple[str, ...] = ("email", "pdf", "sync", "report", "resize", "webhook", "invoice")
TYPES += ("export", "backup", "digest")
TYPE_WEIGHTS = (400, 200, 100, 80, 70, 60, 40, 30, 19.5, 0.5)  # digest: 1 job in 2,000
PRODUCERS = tuple(f"producer-{i:02}" for i in range(20))
WORKERS = tuple(f"worker-{i:02}" for i in range(50))
PLANS = ("free", "pro", "enterprise")
# Status shares (cumulative): the latest event of each follows from the status.
STATUS_SHARES = (("completed", 0.70), ("pending", 0.90), ("running", 0.94), ("failed", 0.98))
LAST_STATUS = "cancelled"
PREVIOUS = {"pending": None, "running": "pending", "completed": "running", "failed": "running"}
PREVIOUS[LAST_STATUS] = "pending"
JOB_COLUMNS = (
    "id, type, payload, priority, status, retry_count, max_retries, idempotency_key,"
    " request_hash, producer, run_at, claimed_at, worker_id, lease_expires_at, error,"
    " created_at, updated_at, finished_at"
)
EVENT_COLUMNS = "job_id, job_type, producer, worker_id, previous_status, status, occurred_at"
TIME_AT = {"jobs": (10, 11, 13, 15, 16, 17), "events": (6,)}  # datetime columns, by index
PAGE = """query($filter: JobFilter, $after: String) {
  jobs(filter: $filter, first: 50, after: $after) {
    nodes { id type status producer workerId createdAt payload }
    pageInfo { hasNextPage endCursor }
  }
}"""
COUNT = "query($filter: JobFilter) { jobs(filter: $filter, first: 1) { totalCount } }"
THROUGHPUT = """query($since: DateTime!, $until: DateTime, $type: String) {
  throughput(since: $since, until: $until, bucketSeconds: 60, type: $type) {
    start enqueued started completed failed retried
  }
}"""
STATS = "{ queueStats { pending running completed failed cancelled } }"
JOB_TYPES = "{ jobTypes { name } }"
PRODUCER = PRODUCERS[3]
UNLIMITED = ("QUEUELOG_RATE_LIMIT_PER_SECOND", "QUEUELOG_ANONYMOUS_RATE_LIMIT_PER_SECOND")
# The lists the targets cover (indexed filters, ≤ 50 ms); payloadContains may scan.
INDEXED = ("ids", "status", "type", "producer", "workerId", "idempotencyKey", "created")


def _jobs(n: int, end: datetime, rng: random.Random) -> Iterator[tuple[tuple[Any, ...], ...]]:
    """Each job's row and its one event."""
    types = rng.choices(TYPES, TYPE_WEIGHTS, k=n)
    lease = end + timedelta(days=1)  # running jobs keep a live lease: nothing rescues them
    step = 86_400 / n
    start = end - timedelta(days=1)
    for i in range(n):
        created = start + timedelta(seconds=i * step)
        r = rng.random()
        status = next((s for s, share in STATUS_SHARES if r < share), LAST_STATUS)
        worker = None if status in ("pending", LAST_STATUS) else WORKERS[rng.randrange(50)]
        claimed = None if worker is None else created + timedelta(seconds=1)
        finished = None if status in ("pending", "running") else created + timedelta(seconds=2)
        updated = finished or claimed or created
        key = f"order-{i}" if i % 3 == 0 else None
        payload = f'{{"customer": {i % 1000}, "plan": "{PLANS[rng.randrange(3)]}", "n": {i}}}'
        producer = PRODUCERS[rng.randrange(20)]
        job = (i + 1, types[i], payload, rng.choice((0, 10, 20, 30)), status, 0, 3, key,
               None if key is None else f"{i:064x}", producer, created, claimed, worker,
               lease if status == "running" else None, "boom" if status == "failed" else None,
               created, updated, finished)  # fmt: skip
        event = (i + 1, types[i], producer, worker, PREVIOUS[status], status, updated)
        yield job, event


def _sqlite_time(row: tuple[Any, ...], at: tuple[int, ...]) -> tuple[Any, ...]:
    """SQLAlchemy's SQLite datetime text: naive UTC."""
    out = list(row)
    for i in at:
        if out[i] is not None:
            out[i] = out[i].replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")
    return tuple(out)


_COUNTS = (
    "INSERT INTO job_counts (job_type, producer, status, n)"
    " SELECT type, producer, status, count(*) FROM jobs GROUP BY type, producer, status"
)


def _load_sqlite(url: str, n: int, end: datetime, rng: random.Random) -> None:
    import sqlite3

    conn = sqlite3.connect(sqlite_path(url), isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        events = []
        jobs_sql = f"INSERT INTO jobs ({JOB_COLUMNS}) VALUES ({', '.join('?' * 18)})"
        batch = []
        for job, event in _jobs(n, end, rng):
            batch.append(_sqlite_time(job, TIME_AT["jobs"]))
            events.append(_sqlite_time(event, TIME_AT["events"]))
            if len(batch) == 50_000:
                conn.executemany(jobs_sql, batch)
                batch.clear()
        conn.executemany(jobs_sql, batch)
        conn.executemany(
            f"INSERT INTO job_events ({EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", events
        )
        conn.execute("DELETE FROM job_counts")
        conn.execute(_COUNTS)
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
    finally:
        conn.close()


def _load_postgres(url: str, n: int, end: datetime, rng: random.Random) -> None:
    import psycopg

    with psycopg.connect(psycopg_url(url)) as conn:
        events = []
        with conn.cursor() as cur, cur.copy(f"COPY jobs ({JOB_COLUMNS}) FROM STDIN") as copy:
            for job, event in _jobs(n, end, rng):
                copy.write_row(job)
                events.append(event)
        with conn.cursor() as cur, cur.copy(f"COPY job_events ({EVENT_COLUMNS}) FROM STDIN") as c:
            for event in events:
                c.write_row(event)
        conn.execute("SELECT setval(pg_get_serial_sequence('jobs', 'id'), %s)", [n])
        conn.execute("DELETE FROM job_counts")
        conn.execute(_COUNTS)
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE")


def _roll_up(url: str) -> float:
    """Roll every loaded event up, in the maintenance loop's batches; the seconds it took."""
    db = Database(url)
    try:
        t0 = time.perf_counter()
        while db.write_sync(rollups_sql.roll_up, ROLLUP_BATCH):
            pass
        return time.perf_counter() - t0
    finally:
        db.close()


class _Timer:
    """Sends queries to one server and keeps each one's times."""

    def __init__(self, server: ServerProcess, repeats: int) -> None:
        self.client = httpx.Client(timeout=120)
        self.url = server.url
        self.repeats = repeats

    def send(self, key: str, query: str, variables: dict[str, Any]) -> tuple[float, Any]:
        headers = {"Authorization": f"Bearer {key}"}
        t0 = time.perf_counter()
        resp = self.client.post(
            self.url, json={"query": query, "variables": variables}, headers=headers
        )
        took = time.perf_counter() - t0
        body = resp.json()
        if body.get("errors"):
            raise RuntimeError(f"{query[:40]}… {variables}: {body['errors']}")
        return took, body["data"]

    def time(self, key: str, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        _, data = self.send(key, query, variables)  # untimed: plans and caches warm
        took = [self.send(key, query, variables)[0] * 1e3 for _ in range(self.repeats)]
        return {"p50_ms": median(took), "max_ms": max(took), "answer": _size(data)}

    def later_page(self, key: str, flt: dict[str, Any], depth: int = 4) -> dict[str, Any]:
        """The page `depth` pages after the first (following endCursor, untimed), timed."""
        after = None
        for _ in range(depth):
            page = self.send(key, PAGE, {"filter": flt, "after": after})[1]["jobs"]["pageInfo"]
            if not page["hasNextPage"]:
                break
            after = page["endCursor"]
        return self.time(key, PAGE, {"filter": flt, "after": after})


def _size(data: Any) -> int:
    """How many rows an answer holds (or its count)."""
    found = next(iter(data.values()))
    if isinstance(found, list):
        return len(found)
    if isinstance(found, dict) and "nodes" in found:
        return len(found["nodes"])
    if isinstance(found, dict) and "totalCount" in found:
        return int(found["totalCount"])
    return 1


def _filters(n: int, end: datetime, rng: random.Random) -> dict[str, dict[str, Any]]:
    hour = (end - timedelta(hours=13)).isoformat(), (end - timedelta(hours=12)).isoformat()
    key = f"order-{(n // 2) // 3 * 3}"
    return {
        "none": {},
        "ids": {"ids": [str(rng.randrange(1, n + 1)) for _ in range(50)]},
        "status": {"statuses": ["FAILED"]},
        "status (common)": {"statuses": ["COMPLETED"]},
        "type": {"types": ["pdf"]},
        "type (rare)": {"types": ["digest"]},
        "producer": {"producer": PRODUCERS[7]},
        "workerId": {"workerId": WORKERS[7]},
        "idempotencyKey": {"idempotencyKey": key},
        "created": {"createdAfter": hour[0], "createdBefore": hour[1]},
        "payloadContains": {"payloadContains": {"customer": 42}},
        "payloadContains (common)": {"payloadContains": {"plan": "enterprise"}},
        "status + type": {"statuses": ["FAILED"], "types": ["pdf"]},
        "producer + status": {"producer": PRODUCERS[7], "statuses": ["PENDING"]},
        "type + created": {"types": ["email"], "createdAfter": hour[0], "createdBefore": hour[1]},
        "workerId + status": {"workerId": WORKERS[7], "statuses": ["FAILED"]},
        "payloadContains + type": {"types": ["pdf"], "payloadContains": {"customer": 42}},
    }


PRODUCER_FILTERS: tuple[str, ...] = ("none", "status", "type", "type (rare)", "created")
PRODUCER_FILTERS += ("idempotencyKey", "payloadContains", "status + type")


async def run(backend: str, workdir: Path, size: int, repeats: int) -> dict[str, Any]:
    """Load `size` jobs, then time every dashboard query as an admin and as a producer."""
    rng = random.Random(9)
    end = datetime.now(UTC).replace(second=0, microsecond=0)  # a dashboard asks by the minute
    out: dict[str, Any] = {"jobs": size, "events": size, "repeats": repeats}
    with database_url(backend, workdir) as url:
        db = Database(url)
        try:
            migrate(db)
        finally:
            db.close()
        t0 = time.perf_counter()
        (_load_sqlite if backend == "sqlite" else _load_postgres)(url, size, end, rng)
        out["load_s"] = time.perf_counter() - t0
        out["rollup_s"] = _roll_up(url)
        env = {
            "QUEUELOG_RATE_LIMIT_PER_SECOND": "0",
            "QUEUELOG_ANONYMOUS_RATE_LIMIT_PER_SECOND": "0",
        }
        with ServerProcess(url, workdir, env, admin_key=ADMIN_SECRET, job_types=TYPES) as server:
            producer = server.create_key("PRODUCER", list(TYPES), name=PRODUCER)
            timer = _Timer(server, repeats)
            out["admin"] = _as(timer, ADMIN_SECRET, _filters(size, end, rng))
            wanted = dict.fromkeys(PRODUCER_FILTERS)
            mine = {k: v for k, v in _filters(size, end, rng).items() if k in wanted}
            out["producer"] = _as(timer, producer, mine)
            out["stats"] = _stats(timer, producer, end)
    return out


def _as(timer: _Timer, key: str, filters: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each filter's first page, a later page and its totalCount, as the key's holder."""
    out: dict[str, Any] = {}
    for name, flt in filters.items():
        out[name] = {
            "first": timer.time(key, PAGE, {"filter": flt}),
            "later": timer.later_page(key, flt),
            "count": timer.time(key, COUNT, {"filter": flt}),
        }
    return out


def _stats(timer: _Timer, producer: str, end: datetime) -> dict[str, Any]:
    """jobTypes (queueStats where this server has none yet) and throughput."""
    day = {"since": (end - timedelta(days=1)).isoformat(), "until": end.isoformat()}
    fields = timer.send(ADMIN_SECRET, '{ __type(name: "Query") { fields { name } } }', {})[1]
    names = {f["name"] for f in fields["__type"]["fields"]}
    counts = JOB_TYPES if "jobTypes" in names else STATS
    label = "jobTypes" if "jobTypes" in names else "queueStats"
    out: dict[str, Any] = {}
    for who, key in (("admin", ADMIN_SECRET), ("producer", producer)):
        out[f"{label} ({who})"] = timer.time(key, counts, {})
        out[f"throughput, all types ({who})"] = timer.time(key, THROUGHPUT, day)
        out[f"throughput, one type ({who})"] = timer.time(key, THROUGHPUT, {**day, "type": "pdf"})
    return out
