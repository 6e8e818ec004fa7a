"""Three `queuelog serve` processes on one PostgreSQL database, writing at once with no
common lock (docs/design.md, "Lock order"): enqueues, claims, outcomes and bulk cancels,
at random, through every replica, while one subscriber per replica follows the feed from
one cursor. Every subscriber hears every event exactly once, all in the same order, each
job's history in its own order; one replica is paused (SIGSTOP) for a few seconds
mid-load, the others' writes go on, and nothing is lost or doubled when it resumes."""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.production.helpers import CLAIM_MANY, COMPLETE, ENQUEUE_MANY, FAIL
from tests.subscriptions.wsclient import WS, enqueue, ws
from tests.support import ADMIN_SECRET, LiveServer

pytestmark = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)

TYPE = "t1"
LOAD_SECONDS = 12.0
PAUSE_AT, PAUSE_SECONDS = 4.0, 3.0
WAIT = 90.0  # seconds: generous, for a loaded machine
CANCEL = """mutation($ids: [ID!]) {
  cancelJobs(filter: {ids: $ids, statuses: [PENDING]}, limit: 50) { count userErrors { code } }
}"""
HISTORY = """query($after: String) {
  jobs(type: "t1", first: 100, after: $after) {
    nodes { id events(first: 1000) { cursor previousStatus status } }
    pageInfo { hasNextPage endCursor } } }"""


OUTCOMES = (COMPLETE, FAIL)


class Load:
    """Random writes through one replica until told to stop; counts what it did, and when."""

    def __init__(self, server: LiveServer, producer: str, worker: str, seed: int) -> None:
        self.server, self.producer, self.worker = server, producer, worker
        self.rng = random.Random(seed)
        self.done: list[float] = []  # the time each write returned
        self.enqueued: list[str] = []
        self.error: BaseException | None = None

    def call(self, op: str, key: str, **variables: Any) -> dict[str, Any]:
        data = self.server.gql(op, variables, key)
        self.done.append(time.monotonic())
        payload = dict(next(iter(data.values())))
        errors = payload.get("userErrors") or []
        # A bulk cancel may cancel a job between its claim and its outcome.
        assert (all(e["code"] == "INVALID_STATE" for e in errors) and op in OUTCOMES) or not errors
        return payload

    def step(self) -> None:
        roll = self.rng.random()
        if roll < 0.4 or not self.enqueued:
            inputs = [{"type": TYPE, "maxRetries": 1} for _ in range(self.rng.randint(1, 5))]
            out = self.call(ENQUEUE_MANY, self.producer, inputs=inputs)
            self.enqueued += [j["id"] for j in out["jobs"]]
        elif roll < 0.85:
            limit = self.rng.randint(1, 4)
            jobs = self.call(CLAIM_MANY, self.worker, limit=limit, types=[TYPE], lease=60)["jobs"]
            for job in jobs:
                if self.rng.random() < 0.7:
                    self.call(COMPLETE, self.worker, id=job["id"], result=None)
                else:
                    self.call(FAIL, self.worker, id=job["id"], error="boom", retryable=True)
        else:
            ids = self.rng.sample(self.enqueued, min(len(self.enqueued), 10))
            self.call(CANCEL, ADMIN_SECRET, ids=ids)

    def run(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                self.step()
        except BaseException as exc:
            self.error = exc


async def _follow(client: WS, op: str, into: list[dict[str, Any]], want: Callable[[], int]) -> None:
    """Collect the subscription's events until `want()` of them have come (then a little
    longer: a doubled event would show)."""
    while True:
        n = want()
        if n and len(into) >= n:
            with_more = len(into)
            try:
                into.append(await client.event(op, wait=1.0))
            except TimeoutError:
                assert len(into) == with_more
                return
            continue
        try:
            into.append(await client.event(op, wait=1.0))
        except TimeoutError:
            continue


def _every_event(server: LiveServer, start: str) -> dict[str, list[tuple[str, Any, Any]]]:
    """Each job's events after `start` through the HTTP API: (cursor, previous, status)."""
    out: dict[str, list[tuple[str, Any, Any]]] = {}
    after = None
    while True:
        page = server.gql(HISTORY, {"after": after}, ADMIN_SECRET)["jobs"]
        for job in page["nodes"]:
            events = [(e["cursor"], e["previousStatus"], e["status"]) for e in job["events"]]
            out[job["id"]] = [e for e in events if int(e[0]) > int(start)]
        if not page["pageInfo"]["hasNextPage"]:
            return out
        after = page["pageInfo"]["endCursor"]


async def test_three_replicas_write_at_once_and_every_subscriber_hears_one_order(
    start_server: Callable[..., LiveServer],
) -> None:
    settings: dict[str, object] = {"job_types": (TYPE,), "maintenance_interval_seconds": 0.5}
    replicas = [start_server(**settings) for _ in range(3)]
    producer = replicas[0].create_key("PRODUCER", [TYPE])
    worker = replicas[0].create_key("WORKER", [TYPE])
    _, start = enqueue(replicas[0], producer, TYPE)
    seed = int(os.environ.get("QUEUELOG_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}")  # shown on failure: QUEUELOG_TEST_SEED replays the choices
    loads = [Load(r, producer, worker, seed + i) for i, r in enumerate(replicas * 2)]
    total: list[int] = [0]  # how many events there are to hear, once the load has stopped
    heard: list[list[dict[str, Any]]] = [[] for _ in replicas]
    stop = threading.Event()
    paused = replicas[2]
    async with (
        ws(replicas[0], ADMIN_SECRET) as c0,
        ws(replicas[1], ADMIN_SECRET) as c1,
        ws(paused, ADMIN_SECRET) as c2,
    ):
        clients = [c0, c1, c2]
        ops = [await c.subscribe({"type": TYPE, "after": start}) for c in clients]
        followers = [
            asyncio.create_task(_follow(c, op, into, lambda: total[0]))
            for c, op, into in zip(clients, ops, heard, strict=True)
        ]
        threads = [threading.Thread(target=ld.run, args=(stop,)) for ld in loads]
        began = time.monotonic()
        for t in threads:
            t.start()
        await asyncio.sleep(PAUSE_AT)
        os.kill(paused.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        try:
            await asyncio.sleep(PAUSE_SECONDS)
        finally:
            os.kill(paused.pid, signal.SIGCONT)
        resumed_at = time.monotonic()
        await asyncio.sleep(max(0.0, LOAD_SECONDS - (resumed_at - began)))
        stop.set()

        def join() -> None:
            for t in threads:
                t.join(WAIT)

        await asyncio.to_thread(join)
        for ld in loads:
            assert ld.error is None, f"seed {seed}: {ld.error!r}"

        # While the replica was paused, the others' writes went on.
        others = [ld for ld in loads if ld.server is not paused]
        during = sum(1 for ld in others for t in ld.done if stopped_at < t < resumed_at)
        assert during > 0, f"seed {seed}: no write through the running replicas"

        histories = await asyncio.to_thread(_every_event, replicas[0], start)
        every = sorted((e for h in histories.values() for e in h), key=lambda e: int(e[0]))
        total[0] = len(every)
        async with asyncio.timeout(WAIT):
            await asyncio.gather(*followers)

    cursors = [e[0] for e in every]
    assert len(set(cursors)) == len(cursors)
    for got in heard:
        # every event exactly once, in cursor order, the same order on every replica
        assert [e["cursor"] for e in got] == cursors, f"seed {seed}"
        by_job: dict[str, list[tuple[Any, Any]]] = {}
        for e in got:
            by_job.setdefault(e["job"]["id"], []).append((e["previousStatus"], e["status"]))
        for job_id, seen in by_job.items():
            assert seen == [(p, s) for _, p, s in histories[job_id]], f"seed {seed}: {job_id}"
            for before, after in itertools.pairwise(seen):
                assert after[0] == before[1], f"seed {seed}: job {job_id} skipped a step"
    assert sum(len(ld.done) for ld in loads) > 30  # the load did run
