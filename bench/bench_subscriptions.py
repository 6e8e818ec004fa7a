"""Subscription delivery latency: from the change to each subscriber, with many subscribers.

    run(db_url, workdir, subscribers=1000, smoke=False, rate=2.0, seconds=10.0, repeats=3)
    -> dict

Starts one `queuelog serve` on `db_url` (a fresh database is best; `workdir` holds its log)
and measures two selections of `jobStatusChanged(type: …)` on that server, `repeats` times
each, interleaved: every repeat measures both, the first of the two alternating from repeat
to repeat, so that neither always runs on a server the other has just warmed. Each
measurement has its own `subscribers` new WebSocket connections (graphql-transport-ws), one
subscription each:

- "events": `cursor occurredAt`, the event alone;
- "with_job": `cursor occurredAt status job { id status }`, as a frontend showing job
  status asks: resolving `job` reads the job (one read per change, shared by every
  subscriber). Every delivered job is checked: its id a string, its status a known one.

For each selection: check that every subscription is live (each receives one warm-up
event), then enqueue jobs at a steady `rate` per second for `seconds`: every enqueue is one
event that every subscriber must receive. Latency of one delivery = the subscriber's receive
time minus the event's `occurredAt` (the server's clock when the change was made, just
before its commit; same machine, same clock). Server CPU per delivery = the server
process's CPU time (all threads) from the first steady enqueue until the last delivery
arrived (or the wait gave up), over the deliveries; it includes the enqueues themselves,
which are few. The connections are closed before the next measurement. Returns

    {"events": {...}, "with_job": {...}}, each a flat dict:
    subscribers, events, rate_per_s, delivered, expected, missing, p50_ms, p99_ms, max_ms,
    server_us_per_delivery

over the selection's repeats: the counts (events, delivered, expected, missing) summed, so
that no missed delivery hides; p50_ms, p99_ms, max_ms and server_us_per_delivery the median
of the repeats' figures.

A message carrying errors, or a subscription the server ends, fails the run. `smoke=True`
runs 2 s per measurement at the given size (the runner passes 20 subscribers and its
profile's repeats) and asserts nothing about speed. At 1,000 subscribers a repeat of both
selections takes ~25 s.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection

from bench.common import (
    ADMIN_SECRET,
    Server,
    cpu_seconds,
    deliveries,
    median,
    percentile,
    subscribe,
)

JOB_TYPE = "email"
SELECTIONS = {
    "events": "cursor occurredAt",
    "with_job": "cursor occurredAt status job { id status }",
}
JOB_STATUSES = frozenset({"PENDING", "RUNNING", "COMPLETED", "FAILED"})
ENQUEUE = "mutation($t: String!) { enqueueJob(input: {type: $t}) { job { id } } }"
SUMMED = ("events", "delivered", "expected", "missing")
MEDIAN = ("p50_ms", "p99_ms", "max_ms", "server_us_per_delivery")


def subscription(selection: str) -> str:
    return f"subscription($t: String) {{ jobStatusChanged(type: $t) {{ {selection} }} }}"


@dataclass
class Seen:
    """What every subscriber of one selection received: a count, and each latency in s."""

    with_job: bool
    count: int = 0
    latencies: list[float] = field(default_factory=list)

    def reset(self) -> None:
        self.count = 0
        self.latencies.clear()


async def _listen(conn: ClientConnection, seen: Seen) -> None:
    async for received, data in deliveries(conn):
        event = data["jobStatusChanged"]
        if seen.with_job:
            job = event.get("job") or {}
            if not isinstance(job.get("id"), str) or job.get("status") not in JOB_STATUSES:
                raise RuntimeError(f"a delivery without a proper job: {event}")
        seen.latencies.append(received - datetime.fromisoformat(event["occurredAt"]).timestamp())
        seen.count += 1


def _check(readers: list[asyncio.Task[None]]) -> None:
    """A reader ends only by failing, or by its connection closing under it."""
    for task in readers:
        if task.done():
            task.result()
            raise RuntimeError("a subscriber's connection closed during the run")


async def _enqueue_steadily(server: Server, key: str, rate: float, seconds: float) -> int:
    sent = 0
    headers = {"Authorization": f"Bearer {key}"}
    body = {"query": ENQUEUE, "variables": {"t": JOB_TYPE}}
    start = time.perf_counter()
    async with httpx.AsyncClient(timeout=30) as http:
        while (due := start + sent / rate) < start + seconds:
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            response = await http.post(server.url, json=body, headers=headers)
            assert "errors" not in response.json(), response.text
            sent += 1
    return sent


async def _wait_for(
    seen: Seen, count: int, limit: float, readers: list[asyncio.Task[None]]
) -> None:
    deadline = time.perf_counter() + limit
    while seen.count < count and time.perf_counter() < deadline:
        _check(readers)
        await asyncio.sleep(0.05)


async def _measure(
    server: Server, producer: str, selection: str, subscribers: int, rate: float, seconds: float
) -> dict[str, Any]:
    """One selection: `subscribers` new connections, live-checked, then the steady phase."""
    query, variables = subscription(SELECTIONS[selection]), {"t": JOB_TYPE}
    conns: list[ClientConnection] = []
    readers: list[asyncio.Task[None]] = []
    seen = Seen(with_job=selection == "with_job")
    try:
        for i in range(0, subscribers, 50):  # 50 handshakes at a time
            batch = min(50, subscribers - i)
            conns += await asyncio.gather(
                *(subscribe(server.ws_url, ADMIN_SECRET, query, variables) for _ in range(batch))
            )
        readers = [asyncio.create_task(_listen(c, seen)) for c in conns]
        # Every subscription is live once each has received one warm-up event.
        await _enqueue_steadily(server, producer, 1.0, 0.5)
        await _wait_for(seen, subscribers, 60, readers)
        if seen.count < subscribers:
            raise RuntimeError(f"{selection}: only {seen.count} of {subscribers} went live")
        seen.reset()
        cpu0 = cpu_seconds(server.pid)
        sent = await _enqueue_steadily(server, producer, rate, seconds)
        expected = sent * subscribers
        await _wait_for(seen, expected, 30, readers)
        cpu = cpu_seconds(server.pid) - cpu0
        _check(readers)
    finally:
        for task in readers:
            task.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)
    ms = [x * 1000 for x in seen.latencies]
    return {
        "subscribers": subscribers,
        "events": sent,
        "rate_per_s": rate,
        "delivered": seen.count,
        "expected": expected,
        "missing": expected - seen.count,
        "p50_ms": round(percentile(ms, 50), 1),
        "p99_ms": round(percentile(ms, 99), 1),
        "max_ms": round(max(ms), 1) if ms else float("nan"),
        "server_us_per_delivery": round(1e6 * cpu / seen.count, 1) if seen.count else float("nan"),
    }


async def run(
    db_url: str,
    workdir: Path,
    subscribers: int = 1_000,
    smoke: bool = False,
    rate: float = 2.0,
    seconds: float = 10.0,
    repeats: int = 3,
) -> dict[str, Any]:
    seconds = 2.0 if smoke else seconds
    names = list(SELECTIONS)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    with Server(db_url, workdir) as server:
        producer = server.create_key("PRODUCER", name=f"bench-subs-{uuid.uuid4().hex[:8]}")
        for i in range(repeats):
            for name in names[::-1] if i % 2 else names:
                runs[name].append(
                    await _measure(server, producer, name, subscribers, rate, seconds)
                )
    return {name: _over_repeats(r) for name, r in runs.items()}


def _over_repeats(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        **runs[0],
        **{key: sum(r[key] for r in runs) for key in SUMMED},
        **{key: median([r[key] for r in runs]) for key in MEDIAN},
    }


if __name__ == "__main__":  # python -m bench.bench_subscriptions [sqlite|postgresql]
    import sys
    import tempfile

    import uvloop

    from bench.common import database_url

    backend = sys.argv[1] if len(sys.argv) > 1 else "sqlite"
    with tempfile.TemporaryDirectory() as tmp, database_url(backend, Path(tmp)) as url:
        print(uvloop.run(run(url, Path(tmp))))
