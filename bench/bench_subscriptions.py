"""Subscription delivery latency: from the change to each subscriber, with many subscribers.

    run(db_url, workdir, subscribers=1000, smoke=False, rate=5.0, seconds=10.0) -> dict

Starts one `queuelog serve` on `db_url` (a fresh database is best; `workdir` holds its log),
opens `subscribers` WebSocket connections (graphql-transport-ws), each with one
`jobStatusChanged(type: …)` subscription, checks that every one of them is live, then
enqueues jobs at a steady `rate` per second for `seconds`: every enqueue is one event that
every subscriber must receive. Latency of one delivery = the subscriber's receive time minus
the event's `occurredAt` (the server's clock when the change was made, just before its
commit; same machine, same clock). Returns a flat dict:

    subscribers, events, rate_per_s, delivered, expected, missing, p50_ms, p99_ms, max_ms

`smoke=True` runs 2 s at the given size (the runner passes 20 subscribers) and asserts
nothing about speed. A full run at 1,000 subscribers takes ~20-30 s.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from contextlib import AsyncExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
from websockets.asyncio.client import ClientConnection, connect

from bench.common import ADMIN_SECRET, Server, percentile

JOB_TYPE = "email"
SUBSCRIBE = "subscription($t: String) { jobStatusChanged(type: $t) { cursor occurredAt } }"
ENQUEUE = "mutation($t: String!) { enqueueJob(input: {type: $t}) { job { id } } }"


async def _connect(url: str) -> ClientConnection:
    conn = await connect(url, subprotocols=["graphql-transport-ws"], max_queue=None)  # type: ignore[list-item]
    init = {"type": "connection_init", "payload": {"authorization": f"Bearer {ADMIN_SECRET}"}}
    await conn.send(orjson.dumps(init).decode())
    ack = orjson.loads(await conn.recv())
    assert ack["type"] == "connection_ack", ack
    payload = {"query": SUBSCRIBE, "variables": {"t": JOB_TYPE}}
    await conn.send(orjson.dumps({"id": "1", "type": "subscribe", "payload": payload}).decode())
    return conn


async def _listen(conn: ClientConnection, latencies: list[float], got: list[int]) -> None:
    async for raw in conn:
        received = time.time()
        message = orjson.loads(raw)
        if message.get("type") != "next":
            continue
        event = message["payload"]["data"]["jobStatusChanged"]
        latencies.append(received - datetime.fromisoformat(event["occurredAt"]).timestamp())
        got[0] += 1


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


async def _wait_for(got: list[int], count: int, limit: float) -> None:
    for _ in range(int(limit / 0.05)):
        if got[0] >= count:
            return
        await asyncio.sleep(0.05)


async def run(
    db_url: str,
    workdir: Path,
    subscribers: int = 1_000,
    smoke: bool = False,
    rate: float = 2.0,
    seconds: float = 10.0,
) -> dict[str, Any]:
    seconds = 2.0 if smoke else seconds
    with Server(db_url, workdir) as server:
        producer = server.create_key("PRODUCER", name=f"bench-subs-{uuid.uuid4().hex[:8]}")
        ws_url = server.url.replace("http://", "ws://")
        async with AsyncExitStack() as stack:
            conns: list[ClientConnection] = []
            for i in range(0, subscribers, 50):  # 50 handshakes at a time
                batch = min(50, subscribers - i)
                conns += await asyncio.gather(*(_connect(ws_url) for _ in range(batch)))
            for conn in conns:
                stack.push_async_callback(conn.close)
            latencies: list[float] = []
            got = [0]
            readers = [asyncio.create_task(_listen(c, latencies, got)) for c in conns]
            # Every subscription is live once each has received one warm-up event.
            await _enqueue_steadily(server, producer, 1.0, 0.5)
            await _wait_for(got, subscribers, 60)
            if got[0] < subscribers:
                raise RuntimeError(f"only {got[0]} of {subscribers} subscriptions went live")
            latencies.clear()
            got[0] = 0
            sent = await _enqueue_steadily(server, producer, rate, seconds)
            expected = sent * subscribers
            await _wait_for(got, expected, 30)
            for task in readers:
                task.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
    ms = [x * 1000 for x in latencies]
    return {
        "subscribers": subscribers,
        "events": sent,
        "rate_per_s": rate,
        "delivered": got[0],
        "expected": expected,
        "missing": expected - got[0],
        "p50_ms": round(percentile(ms, 50), 1),
        "p99_ms": round(percentile(ms, 99), 1),
        "max_ms": round(max(ms), 1) if ms else float("nan"),
    }


if __name__ == "__main__":  # python -m bench.bench_subscriptions [sqlite|postgresql]
    import sys
    import tempfile

    from bench.common import database_url

    backend = sys.argv[1] if len(sys.argv) > 1 else "sqlite"
    with tempfile.TemporaryDirectory() as tmp, database_url(backend, Path(tmp)) as url:
        print(asyncio.run(run(url, Path(tmp))))
