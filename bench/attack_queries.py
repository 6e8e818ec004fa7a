"""What one GraphQL request may cost the server: two attacks run against a live server while
a bystander producer enqueues one job at a time, recording the server's memory and the
bystander's latency.

- introspection: anonymous clients, each sending fifteen aliases of a full `__schema` walk;
- amplification: a producer reading its own jobs of large payloads through fifteen aliased
  `jobs(first: 100)` pages;
- subscriber churn: rounds of subscribers that select each job's large payload, receive a
  burst of changes and leave: what the server still holds for delivery once they are gone.

    python -m bench.attack_queries [sqlite|postgresql] [seconds]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.common import (
    ADMIN_SECRET,
    Server,
    database_url,
    deliveries,
    median,
    percentile,
    rss_bytes,
    subscribe,
)

ALIASES = 15
ANONYMOUS_CLIENTS = 8
AMPLIFIERS = 2
SEEDED_JOBS = 30
PAYLOAD_CHARS = 60_000  # just under the shipped 64 KiB payload limit, once serialized
INTROSPECTION = (
    "{ "
    + " ".join(
        f"s{i}: __schema {{ types {{ name fields {{ name args {{ name type {{ name kind "
        f"ofType {{ name kind ofType {{ name kind }} }} }} }} type {{ name kind ofType {{ "
        f"name kind }} }} }} }} }}"
        for i in range(ALIASES)
    )
    + " }"
)
AMPLIFY = (
    "{ "
    + " ".join(f"p{i}: jobs(first: 100) {{ nodes {{ payload }} }}" for i in range(ALIASES))
    + " }"
)
CHURN = 'subscription { jobStatusChanged(type: "pdf") { cursor job { id payload } } }'
ENQUEUE = 'mutation($p: JSON) { enqueueJob(input: {type: "email", payload: $p}) { job { id } } }'


def _bearer(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


async def _attacker(
    client: httpx.AsyncClient, url: str, query: str, key: str | None, stop: asyncio.Event
) -> dict[str, int]:
    """Send `query` again and again until `stop`; count answers with data and refusals."""
    seen = {"answered": 0, "refused": 0, "failed": 0, "bytes": 0}
    while not stop.is_set():
        try:
            response = await client.post(url, json={"query": query}, headers=_bearer(key))
        except httpx.HTTPError:
            seen["failed"] += 1
            continue
        seen["bytes"] = max(seen["bytes"], len(response.content))
        body = orjson.loads(response.content) if response.content[:1] == b"{" else {}
        seen["answered" if body.get("data") else "refused"] += 1
    return seen


async def _bystander(client: httpx.AsyncClient, url: str, key: str, seconds: float) -> list[float]:
    """Enqueue one small job at a time for `seconds`; each request's latency."""
    latencies: list[float] = []
    body = {"query": ENQUEUE, "variables": {"p": {"n": 1}}}
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        response = await client.post(url, json=body, headers=_bearer(key))
        response.raise_for_status()
        latencies.append(time.perf_counter() - started)
    return latencies


async def _rss_peak(pid: int, stop: asyncio.Event) -> int:
    peak = 0
    while not stop.is_set():
        peak = max(peak, rss_bytes(pid))
        await asyncio.sleep(0.05)
    return peak


def _latency(latencies: list[float]) -> dict[str, float]:
    return {
        "requests": len(latencies),
        "p50_ms": round(median(latencies) * 1000, 2),
        "p99_ms": round(percentile(latencies, 99) * 1000, 2),
    }


async def _under_attack(
    server: Server,
    bystander_key: str,
    attackers: list[Callable[[asyncio.Event], Coroutine[Any, Any, dict[str, int]]]],
    seconds: float,
) -> dict[str, Any]:
    stop = asyncio.Event()
    rss_before = rss_bytes(server.pid)
    async with httpx.AsyncClient(timeout=120) as client:
        peak = asyncio.create_task(_rss_peak(server.pid, stop))
        attacks = [asyncio.create_task(a(stop)) for a in attackers]
        latencies = await _bystander(client, server.url, bystander_key, seconds)
        stop.set()
        seen = await asyncio.gather(*attacks)
        peak_rss = await peak
    totals = {k: sum(s[k] for s in seen) for k in ("answered", "refused", "failed")}
    return {
        "bystander": _latency(latencies),
        "server_rss_mb": round(rss_before / 2**20, 1),
        "server_peak_rss_mb": round(peak_rss / 2**20, 1),
        "largest_response_kb": round(max(s["bytes"] for s in seen) / 1024, 1),
        **totals,
    }


async def _churn(server: Server, producer: str, rounds: int, subscribers: int) -> dict[str, Any]:
    """Each round: `subscribers` subscriptions receive SEEDED_JOBS changes carrying large
    payloads, then leave. The server's memory before, at its peak and after the last left."""
    mib = 2**20
    before = peak = rss_bytes(server.pid)
    big = {"blob": "x" * PAYLOAD_CHARS}
    enqueue = ENQUEUE.replace('"email"', '"pdf"')

    async def drain(conn: Any) -> None:
        seen = 0
        async for _ in deliveries(conn):
            seen += 1
            if seen >= SEEDED_JOBS:
                return

    for _ in range(rounds):
        conns = [await subscribe(server.ws_url, ADMIN_SECRET, CHURN) for _ in range(subscribers)]
        await asyncio.sleep(0.3)  # every subscription registered before the burst
        for _ in range(SEEDED_JOBS):
            server.gql(enqueue, {"p": big}, producer)
        async with asyncio.timeout(120):
            await asyncio.gather(*(drain(c) for c in conns))
        peak = max(peak, rss_bytes(server.pid))
        for conn in conns:
            await conn.close()
    await asyncio.sleep(1.0)
    return {
        "rounds": rounds,
        "subscribers": subscribers,
        "events_per_round": SEEDED_JOBS,
        "rss_before_mib": round(before / mib, 1),
        "rss_peak_mib": round(peak / mib, 1),
        "rss_after_mib": round(rss_bytes(server.pid) / mib, 1),
    }


async def run(backend: str = "sqlite", seconds: float = 8.0) -> dict[str, Any]:
    """Both attacks on one backend: the bystander's latency alone, then during each."""
    with tempfile.TemporaryDirectory() as tmp, database_url(backend, Path(tmp)) as url:
        server = Server(url, Path(tmp))
        server.start()
        try:
            attacker = server.create_key("PRODUCER")
            bystander = server.create_key("PRODUCER")
            big = {"blob": "x" * PAYLOAD_CHARS}
            for _ in range(SEEDED_JOBS):
                server.gql(ENQUEUE, {"p": big}, attacker)
            async with httpx.AsyncClient(timeout=120) as client:
                quiet = _latency(await _bystander(client, server.url, bystander, seconds / 2))

                def anonymous(stop: asyncio.Event) -> Coroutine[Any, Any, dict[str, int]]:
                    return _attacker(client, server.url, INTROSPECTION, None, stop)

                def amplifier(stop: asyncio.Event) -> Coroutine[Any, Any, dict[str, int]]:
                    return _attacker(client, server.url, AMPLIFY, attacker, stop)

                introspection = await _under_attack(
                    server, bystander, [anonymous] * ANONYMOUS_CLIENTS, seconds
                )
                amplification = await _under_attack(
                    server, bystander, [amplifier] * AMPLIFIERS, seconds
                )
            churn = await _churn(server, attacker, 1 if seconds < 4 else 10, 10)
        finally:
            server.stop()
    return {
        "backend": backend,
        "seconds": seconds,
        "quiet": quiet,
        "introspection": introspection,
        "amplification": amplification,
        "subscriber_churn": churn,
    }


if __name__ == "__main__":
    backends = sys.argv[1:2] or ["sqlite", "postgresql"]
    duration = float(sys.argv[2]) if len(sys.argv) > 2 else 8.0
    results = [asyncio.run(run(b, duration)) for b in backends]
    print(orjson.dumps(results, option=orjson.OPT_INDENT_2).decode())
