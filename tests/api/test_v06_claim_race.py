"""V-06: racy claim. Workers racing for one job over HTTP: exactly one gets it. (The 8-worker,
2,000-job concurrency test lives with the storage tests.)"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tests.api.attack import CLAIM, admin_job, enqueued
from tests.support import ADMIN_SECRET, LiveServer

RACERS = 4
ROUNDS = 5


def test_v06_racing_workers_one_winner(server: LiveServer, job_type: str) -> None:
    names = [server.unique_name(f"racer{i}") for i in range(RACERS)]
    keys = [server.create_key("WORKER", [job_type], name=n) for n in names]
    clients = [httpx.Client(timeout=30) for _ in keys]
    barrier = threading.Barrier(RACERS)

    def race(i: int) -> Any:
        barrier.wait()
        resp = clients[i].post(
            server.url,
            json={"query": CLAIM, "variables": {"types": [job_type]}},
            headers={"Authorization": f"Bearer {keys[i]}"},
        )
        return resp.json()["data"]["claimJob"]

    try:
        with ThreadPoolExecutor(RACERS) as pool:
            for _ in range(ROUNDS):
                job = enqueued(server, ADMIN_SECRET, type=job_type)
                results = list(pool.map(race, range(RACERS)))
                assert all(r["userErrors"] == [] for r in results), results
                winners = [(i, r["job"]) for i, r in enumerate(results) if r["job"] is not None]
                assert len(winners) == 1, results
                i, won = winners[0]
                assert won["id"] == job["id"] and won["workerId"] == names[i]
                held = admin_job(server, job["id"])
                assert held["status"] == "RUNNING" and held["workerId"] == names[i]
    finally:
        for c in clients:
            c.close()
