"""V-06: many workers claiming at once never get the same job, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import sqlalchemy as sa
from sqlalchemy import event

from queuelog.config import Settings
from queuelog.runtime import Services, open_services
from queuelog.service.jobs import JobService
from queuelog.service.models import Actor, EnqueueRequest, Role
from queuelog.storage.db import Database
from queuelog.storage.migrate import migrate
from queuelog.storage.tables import job_events
from queuelog.storage.tx import Tx
from tests.support import ADMIN_SECRET, LiveServer

JOBS = 2_000
WORKERS = 8
REPLICAS = 2  # two JobServices with their own engines, as two servers on one database
PRODUCER = Actor("producer", Role.PRODUCER)


def claims_per_job(db: Database) -> Counter[int]:
    """How many PENDING -> RUNNING events each job has."""

    def read(tx: Tx) -> Counter[int]:
        E = job_events.c
        stmt = sa.select(E.job_id, sa.func.count()).where(
            E.previous_status == "pending", E.status == "running"
        )
        return Counter({job_id: n for job_id, n in tx.conn.execute(stmt.group_by(E.job_id))})

    return db.read_sync(read)


async def drain(service: JobService, name: str) -> list[int]:
    """One worker: claim one job at a time until none is left, then complete them all."""
    me = Actor(name, Role.WORKER)
    held: list[int] = []
    while got := await service.claim(me, ["email"], None, 1):
        held.append(got[0].id)
    for job_id in held:
        await service.complete(me, job_id, {"by": name})
    return held


def open_replica(settings: Settings) -> Services:
    """Services as one server has them, with commits that skip the disk flush: durability
    is not under test here, and the flush per commit would dominate the run."""
    services = open_services(settings.model_copy(update={"sqlite_synchronous": "NORMAL"}))
    if services.db.dialect == "postgresql":

        @event.listens_for(services.db.writer, "connect")
        def _relaxed(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.execute("SET synchronous_commit = off")
            dbapi_conn.commit()

    return services


async def test_v06_eight_workers_claim_2000_jobs_and_none_is_held_twice(
    settings: Settings,
) -> None:
    """The workers run on two JobService replicas with their own engines (as two servers on
    one database would), so the database settles the race, not one process's writer thread.
    """
    replicas = [open_replica(settings) for _ in range(REPLICAS)]
    try:
        migrate(replicas[0].db)
        services = replicas[0]
        service = services.service
        ids: list[int] = []
        for start in range(0, JOBS, 500):
            batch = [
                EnqueueRequest(type="email", payload={"n": n}) for n in range(start, start + 500)
            ]
            ids += [j.id for j in await service.enqueue_many(PRODUCER, batch)]
        held = await asyncio.gather(
            *(drain(replicas[i % REPLICAS].service, f"worker-{i}") for i in range(WORKERS))
        )
        await check_each_job_claimed_once(services, ids, held)
    finally:
        for replica in replicas:
            replica.db.close()


async def check_each_job_claimed_once(
    services: Services, ids: list[int], held: list[list[int]]
) -> None:
    claimed = [job_id for mine in held for job_id in mine]
    assert len(claimed) == JOBS and sorted(claimed) == sorted(ids)  # each job exactly once
    assert sum(1 for mine in held if mine) > 1  # the workers really did share the work
    assert set(claims_per_job(services.db).values()) == {1}
    assert len(claims_per_job(services.db)) == JOBS
    admin = Actor("admin", Role.ADMIN)
    assert await services.service.counts(admin, "email") == {
        "pending": 0,
        "running": 0,
        "completed": JOBS,
        "failed": 0,
        "cancelled": 0,
    }


# -- the same through the HTTP API of a live server -------------------------------------------

HTTP_JOBS = 300
CLAIM = """mutation($types: [String!]) {
  claimJob(types: $types) { job { id workerId } userErrors { code message } } }"""
COMPLETE = """mutation($id: ID!) {
  completeJob(id: $id, result: {ok: true}) { job { status } userErrors { code message } } }"""
JOBS_PAGE = """query($type: String, $after: String) {
  jobs(type: $type, first: 100, after: $after) {
    totalCount pageInfo { hasNextPage endCursor }
    nodes { id status workerId events { previousStatus status } } } }"""


def _gql(client: httpx.Client, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/graphql", json={"query": query, "variables": variables})
    assert response.status_code == 200, (response.status_code, response.text)
    body = response.json()
    assert not body.get("errors"), body
    return dict(body["data"])


def _http_worker(server: LiveServer, secret: str, job_type: str) -> list[str]:
    headers = {"Authorization": f"Bearer {secret}"}
    with httpx.Client(
        base_url=f"http://127.0.0.1:{server.port}", headers=headers, timeout=30
    ) as client:
        held: list[str] = []
        while True:
            out = _gql(client, CLAIM, {"types": [job_type]})["claimJob"]
            assert out["userErrors"] == [], out
            if out["job"] is None:
                break
            held.append(out["job"]["id"])
        for job_id in held:
            done = _gql(client, COMPLETE, {"id": job_id})["completeJob"]
            assert done["userErrors"] == [] and done["job"]["status"] == "COMPLETED", done
        return held


def test_v06_concurrent_http_claims_never_hand_out_a_job_twice(
    server: LiveServer, job_type: str
) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    inputs = [{"type": job_type, "payload": {"n": n}} for n in range(HTTP_JOBS)]
    made = server.gql(
        """mutation($inputs: [EnqueueJobInput!]!) {
             enqueueJobs(inputs: $inputs) { jobs { id } userErrors { code message } } }""",
        {"inputs": inputs},
        producer,
    )["enqueueJobs"]
    assert made["userErrors"] == []
    ids = sorted(int(j["id"]) for j in made["jobs"])
    workers = [server.create_key("WORKER", [job_type]) for _ in range(WORKERS)]

    with ThreadPoolExecutor(WORKERS) as pool:
        held = list(pool.map(lambda key: _http_worker(server, key, job_type), workers))

    claimed = sorted(int(job_id) for mine in held for job_id in mine)
    assert claimed == ids  # every job claimed, none twice
    assert sum(1 for mine in held if mine) > 1

    seen: list[dict[str, Any]] = []
    after = None
    while True:
        page = server.gql(JOBS_PAGE, {"type": job_type, "after": after}, ADMIN_SECRET)["jobs"]
        seen += page["nodes"]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    assert len(seen) == HTTP_JOBS
    for job in seen:
        assert job["status"] == "COMPLETED"
        assert [(e["previousStatus"], e["status"]) for e in job["events"]] == [
            (None, "PENDING"),
            ("PENDING", "RUNNING"),
            ("RUNNING", "COMPLETED"),
        ]
