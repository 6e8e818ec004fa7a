"""2-3. Over HTTP: one `queuelog serve` process, driven from this process by an aiohttp
client at a fixed number of concurrent connections. Each rate is also given as a ratio to
the same server answering `{ __typename }` in the same repeat."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from bench.common import Profile, Server, cpu_seconds, deliveries, median, percentile, subscribe

CONNECTIONS = 32
BATCH = 100
BATCH_CONNECTIONS = 8

TYPENAME = "{ __typename }"
ENQUEUE = """mutation($input: EnqueueJobInput!) {
  enqueueJob(input: $input) { job { id } userErrors { code } } }"""
ENQUEUE_MANY = """mutation($inputs: [EnqueueJobInput!]!) {
  enqueueJobs(inputs: $inputs) { jobs { id } userErrors { code } } }"""
CLAIM = 'mutation { claimJob(types: ["email"]) { job { id } userErrors { code } } }'
COMPLETE = "mutation($id: ID!) { completeJob(id: $id) { job { id } userErrors { code } } }"
STATS = "{ queueStats { pending running completed } }"
SOAK_SUBSCRIBERS = 4
SOAK_SUBSCRIPTION = """subscription {
  jobStatusChanged(type: "email", statuses: [COMPLETED]) { cursor status job { id status } } }"""


@dataclass
class Load:
    """What one timed run saw: operations done, and each request's latency in seconds."""

    ops: int = 0
    latencies: list[float] = field(default_factory=list)
    empty_claims: int = 0
    completed: int = 0  # jobs claimed and completed
    server_cpu: float = 0.0  # CPU seconds the server process used meanwhile
    client_cpu: float = 0.0  # and the load generator (this process)


class Client:
    def __init__(self, server: Server, producer: str, worker: str) -> None:
        self.url = server.url
        self.server_pid = server.pid
        self.auth = {
            "producer": {"Authorization": f"Bearer {producer}"},
            "worker": {"Authorization": f"Bearer {worker}"},
            "anonymous": {},
        }
        self.session: aiohttp.ClientSession | None = None
        self.elapsed = 0.0

    async def __aenter__(self) -> Client:
        connector = aiohttp.TCPConnector(limit=CONNECTIONS, force_close=False)
        self.session = aiohttp.ClientSession(connector=connector)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.session is not None
        await self.session.close()

    async def gql(
        self, load: Load, who: str, query: str, variables: dict[str, Any] | None = None
    ) -> Any:
        assert self.session is not None
        t0 = time.perf_counter()
        async with self.session.post(
            self.url, json={"query": query, "variables": variables or {}}, headers=self.auth[who]
        ) as resp:
            body = await resp.json()
        load.latencies.append(time.perf_counter() - t0)
        if resp.status != 200 or body.get("errors"):
            raise RuntimeError(f"{resp.status}: {body}")
        return body["data"]

    async def drive(self, seconds: float, connections: int, step: Any) -> Load:
        """Run `step(load)` in `connections` concurrent loops for `seconds`."""
        load = Load()
        deadline = time.perf_counter() + seconds

        async def loop() -> None:
            while time.perf_counter() < deadline:
                await step(load)

        server0, client0 = cpu_seconds(self.server_pid), time.process_time()
        t0 = time.perf_counter()
        await asyncio.gather(*(loop() for _ in range(connections)))
        self.elapsed = time.perf_counter() - t0
        load.server_cpu = cpu_seconds(self.server_pid) - server0
        load.client_cpu = time.process_time() - client0
        return load

    # -- the workloads ------------------------------------------------------------------

    async def typename(self, load: Load) -> None:
        await self.gql(load, "anonymous", TYPENAME)
        load.ops += 1

    async def enqueue(self, load: Load) -> None:
        data = await self.gql(load, "producer", ENQUEUE, {"input": {"type": "email"}})
        if data["enqueueJob"]["userErrors"]:
            raise RuntimeError(data)
        load.ops += 1

    async def enqueue_batch(self, load: Load) -> None:
        inputs = [{"type": "pdf", "payload": {"n": i}} for i in range(BATCH)]
        data = await self.gql(load, "producer", ENQUEUE_MANY, {"inputs": inputs})
        if data["enqueueJobs"]["userErrors"]:
            raise RuntimeError(data)
        load.ops += BATCH

    async def cycle(self, load: Load) -> None:
        job = (await self.gql(load, "worker", CLAIM))["claimJob"]["job"]
        if job is None:
            load.empty_claims += 1
            return
        done = await self.gql(load, "worker", COMPLETE, {"id": job["id"]})
        if done["completeJob"]["userErrors"]:
            raise RuntimeError(done)
        load.ops += 1
        load.completed += 1

    async def mixed(self, load: Load) -> None:
        """The soak's diet: enqueue, claim+complete, a stats read."""
        await self.enqueue(load)
        await self.cycle(load)
        await self.gql(load, "worker", STATS)


def summarize(loads: list[tuple[Load, float]]) -> dict[str, float]:
    rates = [load.ops / elapsed for load, elapsed in loads]
    return {
        "rate": median(rates),
        "p50_ms": median([percentile(load.latencies, 50) * 1e3 for load, _ in loads]),
        "p99_ms": median([percentile(load.latencies, 99) * 1e3 for load, _ in loads]),
        "empty_claims": float(sum(load.empty_claims for load, _ in loads)),
        # The server's CPU per request (all its threads), and how busy the load generator
        # was: near one core, it and not the server set the rate.
        "server_us": median([1e6 * load.server_cpu / len(load.latencies) for load, _ in loads]),
        "server_cores": median([load.server_cpu / t for load, t in loads]),
        "client_cores": median([load.client_cpu / t for load, t in loads]),
    }


def keys(server: Server) -> tuple[str, str]:
    return (
        server.create_key("PRODUCER", name="bench-producer"),
        server.create_key("WORKER", name="bench-worker"),
    )


async def run(server: Server, profile: Profile) -> dict[str, Any]:
    producer, worker = keys(server)
    seconds = profile.http_seconds
    async with Client(server, producer, worker) as c:
        workloads = {
            "typename": (c.typename, CONNECTIONS),
            "enqueue": (c.enqueue, CONNECTIONS),
            "batch": (c.enqueue_batch, BATCH_CONNECTIONS),
            "cycle": (c.cycle, CONNECTIONS),
        }
        # Warm up every path (parser and validation caches, pools) before timing.
        for step, conns in workloads.values():
            await c.drive(min(seconds, 1.0), conns, step)
        runs: dict[str, list[tuple[Load, float]]] = {name: [] for name in workloads}
        for _ in range(profile.repeats):
            # The enqueue run leaves the jobs the cycle run then claims.
            for name, (step, conns) in workloads.items():
                load = await c.drive(seconds, conns, step)
                runs[name].append((load, c.elapsed))
    out: dict[str, Any] = {name: summarize(r) for name, r in runs.items()}
    base = [load.ops / t for load, t in runs["typename"]]
    for name in ("enqueue", "cycle"):
        mine = [load.ops / t for load, t in runs[name]]
        out[name]["ratio"] = median([m / b for m, b in zip(mine, base, strict=True)])
    out["connections"] = CONNECTIONS
    out["batch_connections"] = BATCH_CONNECTIONS
    return out


async def soak(server: Server, seconds: float, sample: Any) -> dict[str, Any]:
    """Mixed load for `seconds`, calling `sample()` about once a second meanwhile, while
    SOAK_SUBSCRIBERS WebSocket connections each follow every job the soak completes, the job
    included (SOAK_SUBSCRIPTION): the memory sampled then covers living subscriptions.

    They subscribe with the soak's worker key, which sees exactly the jobs it completed. Not
    the producer key: the soak claims the oldest `email` jobs first, and on this server
    those are the HTTP runs' leftover backlog, another producer's, which it never sees.
    After the load, waits for the deliveries still in flight (up to every completion, or
    until a second passes with none)."""
    producer = server.create_key("PRODUCER", name="soak-producer")
    worker = server.create_key("WORKER", name="soak-worker")
    conns = [
        await subscribe(server.ws_url, worker, SOAK_SUBSCRIPTION) for _ in range(SOAK_SUBSCRIBERS)
    ]
    received = [0] * len(conns)

    async def listen(i: int) -> None:
        async for _ in deliveries(conns[i]):
            received[i] += 1

    readers = [asyncio.create_task(listen(i)) for i in range(len(conns))]
    try:
        async with Client(server, producer, worker) as c:
            task = asyncio.create_task(c.drive(seconds, CONNECTIONS, c.mixed))
            while not task.done():
                # A reader ends early only by failing or by losing its connection.
                if ended := [reader for reader in readers if reader.done()]:
                    task.cancel()
                    ended[0].result()
                    raise RuntimeError("a soak subscriber's connection closed")
                sample()
                await asyncio.sleep(min(1.0, seconds / 10))
            load = await task
            # Deliveries lag behind a saturated server; count every change the load made.
            await _drain(received, len(conns) * load.completed)
    finally:
        await asyncio.gather(*(conn.close() for conn in conns), return_exceptions=True)
        outcomes = await asyncio.gather(*readers, return_exceptions=True)
    for failure in outcomes:  # closed by us, a reader ends cleanly
        if isinstance(failure, BaseException):
            raise failure
    if load.ops and not all(received):
        raise RuntimeError(f"a soak subscriber received no change: {received}")
    return {
        "ops": load.ops,
        # Operations, not requests: enqueues plus claim+complete cycles that completed a job;
        # the stats reads and empty claims of the mix are not counted.
        "rate": load.ops / c.elapsed,
        "subscribers": len(conns),
        "completed": load.completed,
        "deliveries": sum(received),
    }


async def _drain(received: list[int], expected: int, quiet: float = 1.0) -> None:
    """Until `expected` deliveries have arrived, or none for `quiet` seconds."""
    last, since = sum(received), time.perf_counter()
    while sum(received) < expected and time.perf_counter() - since < quiet:
        await asyncio.sleep(0.05)
        if sum(received) != last:
            last, since = sum(received), time.perf_counter()
