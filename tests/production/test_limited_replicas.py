"""Two `queuelog serve` replicas on one PostgreSQL database, a type with `maxRunning: 8`,
four `queuelog worker` processes (two on each replica, their claims waiting on the server)
and several producers enqueueing for a while: the drill that deadlocked (an enqueue that
claims for a waiting worker against limited claims appending their events). Every job is
completed exactly once, the limit holds, neither server logs a fault or a deadlock, and
every worker is alive to the end and drains on SIGTERM."""

from __future__ import annotations

import itertools
import random
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import LiveServer
from tests.workers.test_processes import Workers, all_jobs, wait_for

pytestmark = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
LIMIT = 8
PRODUCERS = 6
PRODUCING = 12.0  # seconds the producers enqueue for
LIMITS = """mutation($t: String!, $l: JobTypeLimitsInput!) {
  setJobTypeLimits(type: $t, limits: $l) { userErrors { code field } } }"""
ENQUEUE = """mutation($i: EnqueueJobInput!) { enqueueJob(input: $i) {
  job { id } userErrors { code message } } }"""
ENQUEUE_MANY = """mutation($inputs: [EnqueueJobInput!]!) {
  enqueueJobs(inputs: $inputs) { jobs { id } userErrors { code message } } }"""
RUNNING = "query($t: String) { queueStats(type: $t) { running } }"
ONCE = [(None, "PENDING"), ("PENDING", "RUNNING"), ("RUNNING", "COMPLETED")]
# What a fault, a deadlock or a retried conflict leaves in a server's log.
FAULTS = ("INTERNAL_SERVER_ERROR", "unexpected error", "Traceback", "eadlock", "for a conflict")


def test_limited_claims_on_two_replicas_with_producers_never_deadlock(
    start_server: Callable[..., LiveServer], job_type: str, tmp_path: Path
) -> None:
    replicas = (start_server(), start_server())
    first = replicas[0]
    out = first.gql(LIMITS, {"t": job_type, "l": {"maxRunning": LIMIT}}, first.admin_key)
    assert out["setJobTypeLimits"]["userErrors"] == []
    producer = first.create_key("PRODUCER", [job_type])
    worker_key = first.create_key("WORKER", [job_type])
    pools = [Workers(server, job_type, tmp_path / f"r{i}") for i, server in enumerate(replicas)]
    for pool in pools:
        pool.tmp_path.mkdir()
    # Claims that come back empty at the limit wait on the server (no prefetch): enqueues
    # then claim for them in their own transaction (the hand-off), beside limited claims.
    procs = [
        pool.start(worker_key, "--concurrency", "4", "--prefetch", "0")
        for pool in pools
        for _ in range(2)
    ]
    stop = threading.Event()
    enqueued: list[str] = []
    over_limit: list[int] = []
    errors: list[BaseException] = []
    keys = itertools.count()

    def produce(i: int) -> None:
        rng = random.Random(i)
        server = replicas[i % 2]
        try:
            while not stop.is_set():
                job = {"type": job_type, "payload": {"sleep": rng.choice((0.005, 0.02, 0.05))}}
                if rng.random() < 0.5:
                    got = server.gql(ENQUEUE, {"i": job}, producer)
                    ids = [got["enqueueJob"]["job"]["id"]]
                else:  # some with idempotency keys: then the batch is a write of its own
                    inputs = [
                        {**job, "idempotencyKey": f"{i}-{next(keys)}"}
                        if rng.random() < 0.5
                        else job
                        for _ in range(rng.randint(2, 6))
                    ]
                    got = server.gql(ENQUEUE_MANY, {"inputs": inputs}, producer)
                    ids = [j["id"] for j in got["enqueueJobs"]["jobs"]]
                enqueued.extend(ids)
                time.sleep(rng.uniform(0.01, 0.05))
        except BaseException as exc:
            errors.append(exc)

    def watch_limit() -> None:
        while not stop.is_set():
            running = first.gql(RUNNING, {"t": job_type}, first.admin_key)["queueStats"]["running"]
            if running > LIMIT:
                over_limit.append(running)
            time.sleep(0.05)

    threads = [threading.Thread(target=produce, args=(i,)) for i in range(PRODUCERS)]
    threads.append(threading.Thread(target=watch_limit))
    try:
        for t in threads:
            t.start()
        stop.wait(PRODUCING)
        stop.set()
        for t in threads:
            t.join(60)
        assert errors == []
        assert len(enqueued) > 100  # a real load, not a trickle
        wait_for(first, job_type, "COMPLETED", len(enqueued), seconds=180)
        assert [p.poll() for p in procs] == [None] * len(procs)  # every worker alive

        jobs = all_jobs(first, job_type)
        assert sorted(j["id"] for j in jobs) == sorted(enqueued)
        histories = {
            j["id"]: [(e["previousStatus"], e["status"]) for e in j["events"]] for j in jobs
        }
        assert {i: h for i, h in histories.items() if h != ONCE} == {}  # each completed once
        assert over_limit == []
        for server in replicas:
            logged = server.log()
            assert not [f for f in FAULTS if f in logged], logged[-3000:]
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        assert [p.wait(60) for p in procs] == [0] * len(procs)
        logs = "".join(pool.log(p) for pool in pools for p, _ in pool.procs)
        assert "INTERNAL_SERVER_ERROR" not in logs and "claim failed" not in logs, logs[-3000:]
        assert logs.count(f" {job_type} COMPLETED (after ") == len(enqueued)
    finally:
        stop.set()
        for pool in pools:
            pool.stop_all()
