"""The job-type limits hold across replicas: sixteen workers over HTTP, spread over three
`queuelog serve` processes on one PostgreSQL database, claim jobs of types with
`maxRunning: 3`, `maxRunningPerKey: 1` and `maxStartsPerSecond: 20`, while a separate
connection samples the jobs table about every 20 ms and the workers count what they hold.
A worker in four claims every type at once, the others one type each; half of each kind
long-poll (waitSeconds 1), half poll.

The limits are shared state in the database, so only PostgreSQL can show them across
replicas (SQLite serves one process): the SQLite variant runs the running-count checks with
one server. The `@every 1s` schedule on three replicas is drilled by
tests/ops/test_schedules_api.py (test_three_replicas_make_one_job_per_second_in_all).
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from queuelog.domain.lifecycle import COMPLETED, RUNNING
from queuelog.storage.engines import normalize_url
from queuelog.storage.tables import jobs
from tests.support import LiveServer, live_server

WORKERS = 16
CAPPED, KEYED, PACED = "t1", "t2", "t3"  # maxRunning 3, maxRunningPerKey 1, 20 starts/s
MAX_RUNNING, PER_KEY, RATE = 3, 1, 20.0
KEYS = ("k0", "k1", "k2", "k3")
WORK_SECONDS = (0.01, 0.06)  # each job's work: a sleep drawn from this range

LIMITS = """mutation($t: String!, $l: JobTypeLimitsInput!) { setJobTypeLimits(type: $t, limits: $l)
  { jobType { name limits { maxRunning maxRunningPerKey maxStartsPerSecond } }
    userErrors { code message } } }"""
ENQUEUE = """mutation($i: [EnqueueJobInput!]!) { enqueueJobs(inputs: $i)
  { jobs { id } userErrors { code message } } }"""
CLAIM = """mutation($types: [String!], $wait: Int!) {
  claimJobs(limit: 4, types: $types, waitSeconds: $wait) { jobs { id type concurrencyKey } } }"""
COMPLETE = "mutation($id: ID!) { completeJob(id: $id) { job { status } userErrors { code } } }"

# Under a loaded parallel suite a drill's client has met a dropped connection (httpx.ReadError,
# no server error logged); the limits held in every run. Being investigated.
DROPPED = pytest.mark.xfail(raises=httpx.ReadError, strict=False, reason="connection dropped")


async def gql(client: httpx.AsyncClient, url: str, key: str, query: str, **v: Any) -> Any:
    response = await client.post(
        url, json={"query": query, "variables": v}, headers={"Authorization": f"Bearer {key}"}
    )
    body = response.json()
    assert not body.get("errors"), body
    return body["data"]


@dataclass
class Held:
    """What the workers hold right now, and the most they ever held at once."""

    running: Counter[str] = field(default_factory=Counter)
    per_key: Counter[tuple[str, str]] = field(default_factory=Counter)
    most: Counter[str] = field(default_factory=Counter)
    most_per_key: int = 0
    claimed: Counter[str] = field(default_factory=Counter)  # job id -> times claimed
    completed: int = 0

    def take(self, job: dict[str, Any]) -> None:
        self.claimed[job["id"]] += 1
        self.running[job["type"]] += 1
        self.most[job["type"]] = max(self.most[job["type"]], self.running[job["type"]])
        if job["concurrencyKey"] is not None:
            k = (job["type"], job["concurrencyKey"])
            self.per_key[k] += 1
            self.most_per_key = max(self.most_per_key, self.per_key[k])

    def release(self, job: dict[str, Any]) -> None:
        self.running[job["type"]] -= 1
        if job["concurrencyKey"] is not None:
            self.per_key[job["type"], job["concurrencyKey"]] -= 1


@dataclass
class Samples:
    """RUNNING counts read from the jobs table: one Counter per sample, by (type, key)."""

    taken: list[Counter[tuple[str, str | None]]] = field(default_factory=list)

    def most(self, job_type: str) -> int:
        return max(sum(n for (t, _), n in s.items() if t == job_type) for s in self.taken)

    def most_per_key(self, job_type: str) -> int:
        return max(n for s in self.taken for (t, k), n in s.items() if t == job_type and k)

    def most_keys_at_once(self, job_type: str) -> int:
        return max(len({k for (t, k) in s if t == job_type and k}) for s in self.taken)

    def most_keyless(self, job_type: str) -> int:
        return max(s[job_type, None] for s in self.taken)


def sample_running(db_url: str, types: list[str], stop: threading.Event, out: Samples) -> None:
    """Count the RUNNING jobs by type and key every ~20 ms on a connection of its own."""
    query = (
        sa.select(jobs.c.type, jobs.c.concurrency_key, sa.func.count())
        .where(jobs.c.status == RUNNING, jobs.c.type.in_(types))
        .group_by(jobs.c.type, jobs.c.concurrency_key)
    )
    engine = sa.create_engine(normalize_url(db_url))
    try:
        with engine.connect() as conn:
            while not stop.wait(0.02):
                rows = conn.execute(query).all()
                conn.rollback()  # each sample its own snapshot
                out.taken.append(Counter({(r[0], r[1]): r[2] for r in rows}))
    finally:
        engine.dispose()


async def worker(
    url: str, key: str, wait: int, types: list[str], held: Held, total: int, rng: random.Random
) -> None:
    """Claim, work (a short sleep), complete; until every one of `total` jobs is done. With
    `wait` 0 the worker polls (a short sleep when it got nothing), else it long-polls."""
    async with httpx.AsyncClient(timeout=30) as client:
        while held.completed < total:
            claim = await gql(client, url, key, CLAIM, types=types, wait=wait)
            got = claim["claimJobs"]["jobs"]
            if not got and not wait:
                await asyncio.sleep(0.1)
            for job in got:
                held.take(job)
            await asyncio.sleep(rng.uniform(*WORK_SECONDS))
            for job in got:
                held.release(job)  # before completeJob: still RUNNING in the table
            done = [gql(client, url, key, COMPLETE, id=job["id"]) for job in got]
            for answer in await asyncio.gather(*done):  # together, as the jobs ran together
                ok = {"job": {"status": "COMPLETED"}, "userErrors": []}
                assert answer["completeJob"] == ok, answer
                held.completed += 1


def inputs(job_type: str, n: int, keys: tuple[str | None, ...] = (None,)) -> list[dict[str, Any]]:
    return [{"type": job_type, "concurrencyKey": keys[i % len(keys)]} for i in range(n)]


@dataclass
class Drill:
    """Servers on one database, the jobs to run, and what the drill saw."""

    servers: list[LiveServer]
    limits: dict[str, dict[str, Any]]
    jobs: dict[str, list[dict[str, Any]]]
    held: Held = field(default_factory=Held)
    samples: Samples = field(default_factory=Samples)

    async def run(self) -> None:
        admin, first = self.servers[0].admin_key, self.servers[0]
        async with httpx.AsyncClient(timeout=30) as client:
            for job_type, limits in self.limits.items():
                got = await gql(client, first.url, admin, LIMITS, t=job_type, l=limits)
                assert got["setJobTypeLimits"]["userErrors"] == [], got
            keys = [first.create_key("WORKER") for _ in range(WORKERS)]
            types = list(self.jobs)
            # A worker in four claims every type (a claim over several limited types); the
            # others one type each, so they do not all queue for every type's lock.
            claims = [types, *([t] for t in types)]
            stop = threading.Event()
            sampler = threading.Thread(
                target=sample_running, args=(first.db_url, types, stop, self.samples)
            )
            sampler.start()
            total = sum(len(batch) for batch in self.jobs.values())
            rng = random.Random(4)
            tasks: list[asyncio.Task[None]] = []
            try:
                tasks = [
                    asyncio.create_task(
                        worker(s.url, keys[i], wait, claims[i % len(claims)], self.held, total, rng)
                    )
                    for i in range(WORKERS)
                    for s in [self.servers[i % len(self.servers)]]
                    for wait in [i // len(claims) % 2]  # each kind: some poll, some wait
                ]
                for batch in self.jobs.values():
                    for i in range(0, len(batch), 500):
                        got = await gql(client, first.url, admin, ENQUEUE, i=batch[i : i + 500])
                        assert got["enqueueJobs"]["userErrors"] == [], got
                await asyncio.wait_for(asyncio.gather(*tasks), timeout=90)
            finally:
                for task in tasks:  # a worker that failed leaves the others running
                    task.cancel()
                stop.set()
                sampler.join()

    def statuses(self) -> Counter[tuple[str, str]]:
        engine = sa.create_engine(normalize_url(self.servers[0].db_url))
        try:
            with engine.connect() as conn:
                rows = conn.execute(sa.select(jobs.c.type, jobs.c.status)).all()
        finally:
            engine.dispose()
        return Counter((r[0], r[1]) for r in rows)

    def claimed_at(self, job_type: str) -> list[datetime]:
        engine = sa.create_engine(normalize_url(self.servers[0].db_url))
        try:
            with engine.connect() as conn:
                query = sa.select(jobs.c.claimed_at).where(jobs.c.type == job_type)
                return sorted(r[0] for r in conn.execute(query))
        finally:
            engine.dispose()

    def check_running_limits(self) -> None:
        """maxRunning and maxRunningPerKey never exceeded, in the table or by the workers;
        each reached, other keys and keyless jobs flowing meanwhile; every job run once."""
        held, samples = self.held, self.samples
        assert len(samples.taken) >= 50, "the sampler barely ran"
        assert samples.most(CAPPED) == MAX_RUNNING, samples.most(CAPPED)
        assert held.most[CAPPED] <= MAX_RUNNING, held.most
        assert samples.most_per_key(KEYED) == PER_KEY
        assert held.most_per_key == PER_KEY
        assert samples.most_keys_at_once(KEYED) >= 2  # one busy key holds no other back
        assert samples.most_keyless(KEYED) >= 2  # keyless jobs are not limited per key
        total = sum(len(batch) for batch in self.jobs.values())
        assert len(held.claimed) == total and set(held.claimed.values()) == {1}
        expected = Counter({(t, COMPLETED): len(batch) for t, batch in self.jobs.items()})
        assert self.statuses() == expected


def drill_jobs(with_rate: bool) -> dict[str, list[dict[str, Any]]]:
    plan = {
        CAPPED: inputs(CAPPED, 120),
        KEYED: inputs(KEYED, 150, (*KEYS, None)),  # one job in five has no key
    }
    if with_rate:
        plan[PACED] = inputs(PACED, 280)
    return plan


DRILL_LIMITS: dict[str, dict[str, Any]] = {
    CAPPED: {"maxRunning": MAX_RUNNING},
    KEYED: {"maxRunningPerKey": PER_KEY},
    PACED: {"maxStartsPerSecond": RATE},
}


def started(stack: ExitStack, db_url: str, workdir: Path, replicas: int) -> list[LiveServer]:
    first = stack.enter_context(live_server(db_url, workdir))
    servers = [first]
    for _ in range(replicas - 1):
        servers.append(first.sibling().start())
        stack.callback(servers[-1].stop)
    return servers


@DROPPED
@pytest.mark.postgres  # the limits are shared through the database: replicas need PostgreSQL
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_limits_hold_across_three_replicas(tmp_path: Path, db_url: str) -> None:
    with ExitStack() as stack:
        drill = Drill(started(stack, db_url, tmp_path, 3), DRILL_LIMITS, drill_jobs(True))
        await drill.run()
        drill.check_running_limits()
        starts = drill.claimed_at(PACED)
    # Over 10 s from 1 s after the first start (past the initial burst of 20), while the
    # backlog lasts: 20 starts a second in all, not per replica.
    begin = starts[0] + timedelta(seconds=1)
    window = [t for t in starts if begin <= t < begin + timedelta(seconds=10)]
    assert starts[-1] >= begin + timedelta(seconds=10), "the backlog ran out inside the window"
    per_second = sorted(Counter(int((t - starts[0]).total_seconds()) for t in starts).items())
    assert 170 <= len(window) <= 230, f"{len(window)} starts; per second: {per_second}"


@DROPPED
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_running_limits_hold_for_sixteen_workers(tmp_path: Path, db_url: str) -> None:
    with ExitStack() as stack:
        drill = Drill(started(stack, db_url, tmp_path, 1), DRILL_LIMITS, drill_jobs(False))
        await drill.run()
        drill.check_running_limits()
