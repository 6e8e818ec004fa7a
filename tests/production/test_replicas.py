"""Two `queuelog serve` processes on one database: each expired lease is rescued once."""

from __future__ import annotations

import threading
from collections.abc import Callable

from tests.production.helpers import CLAIM_MANY, ENQUEUE_MANY, Keys, all_jobs, transitions, wait_for
from tests.support import LiveServer

N = 60
FAST: dict[str, object] = {"maintenance_interval_seconds": 0.2, "backoff_base_seconds": 0}


def test_two_servers_rescue_each_expired_lease_once(
    start_server: Callable[..., LiveServer],
) -> None:
    first = start_server(**FAST)
    second = start_server(**FAST)
    stop = threading.Event()
    try:
        keys = Keys.make(first, "t1")
        on_second = Keys(second, "t1", keys.producer, keys.worker, keys.worker2)
        out = keys.call(
            ENQUEUE_MANY,
            keys.producer,
            inputs=[{"type": "t1", "payload": {"i": i}, "maxRetries": 1} for i in range(N)],
        )
        assert len(out["jobs"]) == N

        # While leases expire, both servers also rescue inside every claim (of another type).
        idle = Keys.make(first, "t2")

        def claim_forever(server: LiveServer) -> None:
            while not stop.is_set():
                assert (
                    server.gql(
                        'mutation { claimJob(types: ["t2"]) { job { id } } }', key=idle.worker
                    )["claimJob"]["job"]
                    is None
                )

        hammers = [threading.Thread(target=claim_forever, args=(s,)) for s in (first, second)]
        for h in hammers:
            h.start()

        for via, expect in ((keys, "pending"), (on_second, "failed")):
            held = via.call(CLAIM_MANY, limit=100, types=["t1"], lease=1)["jobs"]
            assert len(held) == N
            wait_for(lambda e=expect: keys.stats()[e] == N, 10)  # type: ignore[misc]
        stop.set()
        for h in hammers:
            h.join()

        jobs = all_jobs(first, "t1")
        assert len(jobs) == N
        for job in jobs:
            assert job["status"] == "FAILED" and job["error"] == "lease expired"
            assert transitions(job) == [
                (None, "PENDING"),
                ("PENDING", "RUNNING"),
                ("RUNNING", "PENDING"),
                ("PENDING", "RUNNING"),
                ("RUNNING", "FAILED"),
            ], job["id"]
    finally:
        stop.set()
