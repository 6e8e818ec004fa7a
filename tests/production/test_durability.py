"""Durability: SIGKILL during streams of enqueues and of claims loses nothing acknowledged
and duplicates nothing; SIGTERM finishes the requests in flight and exits 0."""

from __future__ import annotations

import itertools
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.production.helpers import ENQUEUE, ENQUEUE_MANY, Keys, all_jobs, transitions, wait_for
from tests.support import BACKENDS, LiveServer, session_server

CLIENTS = 4
FAST: dict[str, object] = {"maintenance_interval_seconds": 0.2, "backoff_base_seconds": 0}


@dataclass
class Node:
    """One database and the server currently running on it; each test stops it its own way
    (SIGKILL, SIGTERM) and starts the next one on the same database."""

    server: LiveServer

    def restart(self) -> LiveServer:
        assert self.server.proc is None, "stop the old server first"
        self.server = self.server.sibling().start()
        return self.server


@pytest.fixture(scope="module", params=BACKENDS)
def node(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Node]:
    backend = str(request.param)
    for first in session_server(tmp_path_factory, backend, f"durable-{backend}", **FAST):
        n = Node(first)
        try:
            yield n
        finally:
            n.server.stop()


def _stream(
    work: Callable[[httpx.Client, int], list[str]], until: threading.Event
) -> tuple[list[threading.Thread], list[list[str]]]:
    """CLIENTS threads, each calling `work` in a loop on its own connection until `until` is
    set or the server goes away; each keeps the ids the server acknowledged."""
    acked: list[list[str]] = [[] for _ in range(CLIENTS)]

    def run(n: int) -> None:
        with httpx.Client(timeout=10) as client:
            while not until.is_set():
                try:
                    acked[n].extend(work(client, n))
                except httpx.HTTPError:
                    return

    threads = [threading.Thread(target=run, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    return threads, acked


def _post(client: httpx.Client, server: LiveServer, key: str, op: str, **v: Any) -> Any:
    body = client.post(
        server.url,
        json={"query": op, "variables": v},
        headers={"Authorization": f"Bearer {key}"},
    ).json()
    assert not body.get("errors"), body
    return next(iter(body["data"].values()))


def _kill_mid_stream(server: LiveServer, acked: list[list[str]], threads: list[Any]) -> None:
    wait_for(lambda: sum(map(len, acked)) >= 100, 20, 0.01)
    assert server.proc is not None
    server.proc.kill()
    server.proc.wait()
    server.proc = None
    for t in threads:
        t.join(15)


def _chain_ok(job: dict[str, Any]) -> bool:
    """Every event starts from the status the previous one left: no RUNNING follows RUNNING."""
    steps = transitions(job)
    return steps[0] == (None, "PENDING") and all(
        prev[1] == cur[0] for prev, cur in itertools.pairwise(steps)
    )


def test_sigkill_during_enqueues_loses_no_acknowledged_job(node: Node) -> None:
    server = node.server
    keys = Keys.make(server, "t1")

    def enqueue(client: httpx.Client, n: int) -> list[str]:
        if n % 2:  # half the clients send batches
            inputs = [{"type": "t1", "payload": {"c": n, "i": i}} for i in range(20)]
            return [
                j["id"]
                for j in _post(client, server, keys.producer, ENQUEUE_MANY, inputs=inputs)["jobs"]
            ]
        out = _post(
            client, server, keys.producer, ENQUEUE, input={"type": "t1", "payload": {"c": n}}
        )
        return [out["job"]["id"]]

    never = threading.Event()
    threads, acked = _stream(enqueue, never)
    _kill_mid_stream(server, acked, threads)

    again = node.restart()
    stored = {j["id"]: j for j in all_jobs(again, "t1")}
    ids = [i for a in acked for i in a]
    assert len(ids) == len(set(ids))
    assert set(ids) <= set(stored), "an acknowledged enqueue was lost"
    # At most each client's last request was committed without its answer arriving.
    assert len(stored) - len(ids) <= 20 * CLIENTS
    assert all(transitions(j) == [(None, "PENDING")] for j in stored.values())


def test_sigkill_during_claims_loses_and_doubles_nothing(node: Node) -> None:
    server = node.server
    keys = Keys.make(server, "t2")
    total = 500
    inputs = [{"type": "t2", "payload": {"i": i}} for i in range(total)]
    assert len(keys.call(ENQUEUE_MANY, keys.producer, inputs=inputs)["jobs"]) == total
    workers = [server.create_key("WORKER", ["t2"], name=f"w{n}") for n in range(CLIENTS)]
    claim = 'mutation { claimJob(types: ["t2"], leaseSeconds: 2) { job { id } } }'
    complete = "mutation($id: ID!) { completeJob(id: $id) { job { id } } }"
    completed: list[set[str]] = [set() for _ in range(CLIENTS)]

    def claim_some(client: httpx.Client, n: int) -> list[str]:
        job = _post(client, server, workers[n], claim)["job"]
        if job is None:
            return []
        if int(job["id"]) % 2:  # complete every other job
            _post(client, server, workers[n], complete, id=job["id"])
            completed[n].add(job["id"])
        return [job["id"]]

    threads, acked = _stream(claim_some, threading.Event())
    _kill_mid_stream(server, acked, threads)

    again = node.restart()
    claimed = [i for a in acked for i in a]
    assert len(claimed) == len(set(claimed)), "a job was handed to two workers"
    jobs = {j["id"]: j for j in all_jobs(again, "t2")}
    assert len(jobs) == total  # none lost
    for n, ids in enumerate(acked):
        for job_id in ids:
            job = jobs[job_id]
            if job_id in completed[n]:
                assert job["status"] == "COMPLETED"
            elif job["status"] == "RUNNING":  # still under the lease the worker got
                assert job["workerId"] == f"w{n}" and job["leaseExpiresAt"] is not None
            else:  # its lease expired already (or the completion landed unanswered)
                assert job["status"] in ("PENDING", "COMPLETED"), job
    for job in jobs.values():
        assert job["status"] in ("PENDING", "RUNNING", "COMPLETED")
        assert _chain_ok(job), job
        assert [s for _, s in transitions(job)].count("RUNNING") <= 1  # claimed once
    # Every lease the dead server handed out expires and its job returns to the queue.
    wait_for(lambda: Keys(again, "t2", "", "", "").stats()["running"] == 0, 10)
    for job in all_jobs(again, "t2"):
        assert job["status"] in ("PENDING", "COMPLETED") and _chain_ok(job)


def test_sigterm_finishes_requests_in_flight(node: Node) -> None:
    server = node.server
    keys = Keys.make(server, "t3")
    spans: list[tuple[float, float, list[str]]] = []  # (sent, answered, ids) per answer
    stop = threading.Event()

    def run(n: int) -> None:
        inputs = [{"type": "t3", "payload": {"c": n, "blob": "x" * 200}} for _ in range(100)]
        while not stop.is_set():
            sent = time.monotonic()
            try:  # a fresh connection per request: no idle keep-alive to race the shutdown
                body = server.post(ENQUEUE_MANY, {"inputs": inputs}, keys.producer).json()
            except httpx.HTTPError:
                return
            ids = [j["id"] for j in body["data"]["enqueueJobs"]["jobs"]]
            assert len(ids) == 100
            spans.append((sent, time.monotonic(), ids))

    threads = [threading.Thread(target=run, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    wait_for(lambda: len(spans) >= CLIENTS, 20, 0.01)
    assert server.proc is not None
    term = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    code = server.proc.wait(20)
    stop.set()
    for t in threads:
        t.join(15)
    server.proc = None
    assert code == 0, server.log()
    assert any(sent < term < answered for sent, answered, _ in spans), "none was in flight"

    again = node.restart()
    stored = {j["id"] for j in all_jobs(again, "t3")}
    acked = {i for _, _, ids in spans for i in ids}
    assert acked <= stored
    assert len(stored) == len(acked)  # nothing half-done: every commit was answered
