"""8. Workers end to end: real worker processes against a live server.

- Throughput: one worker process (`queuelog.worker.Worker`, a no-op coroutine handler) at
  concurrency 1, 4 and 16 is started and proven up (it completes a warm-up job); then N jobs
  are enqueued in batches of 100 (`enqueueJobs`) while it works, and the clock runs from the
  first enqueue until `queueStats` counts the last job COMPLETED (polled every 5 ms once the
  end is near, less often before).
- huey, same run, SQLite only: `SqliteHuey` (fsync on) and its consumer (default polling)
  with 1, 4 or 16 thread workers running a no-op task, in a process of its own that starts
  the consumer, runs a warm-up task, then enqueues N tasks one by one itself; the clock runs
  from the first enqueue until the last task has run.
- Latency: one idle long-polling worker (concurrency 1); the producer notes `time.time()`
  before each `enqueueJob`, the handler returns `time.time()` at its start as the job's
  result; one job at a time. The producer asks for the result only 0.1 s after the
  enqueue (then every 10 ms): its requests would otherwise share the server with the
  job's way to the worker.
- Idle claims: 200 `claimJob(waitSeconds)` requests wait on a type nobody enqueues; the
  server's CPU (utime+stime from /proc) from 3 s after they were sent, as a share of one
  core.

    python -m bench.bench_workers worker URL KEY TYPE CONCURRENCY   (a queuelog worker)
    python -m bench.bench_workers huey PATH N WORKERS                (a huey run; prints jobs/s)

QUEUELOG_BENCH_WORKERS=latency,idle runs only those parts of the section (the throughput
and huey parts are `throughput`); unset, it runs them all.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

from bench.common import Server, cpu_seconds, database_url, percentile
from queuelog.client import AsyncClient
from queuelog.worker import RunningJob, Worker

CONCURRENCIES = (1, 4, 16)
THROUGHPUT_TYPE = "email"
LATENCY_TYPE = "pdf"
IDLE_TYPE = "sync"  # nothing is ever enqueued on it
IDLE_CLAIMS = 200
IDLE_SETTLE = 3.0  # seconds between the idle claims' start and the CPU window's
BATCH = 100
POLL_MIN, POLL_MAX = 0.005, 0.1  # seconds between two queueStats polls
RESULT_AFTER = 0.1  # seconds from a latency sample's enqueue to its first result request
STATS = "query($t: String) { queueStats(type: $t) { completed } }"
IDLE_CLAIM = "mutation($t: [String!]) { claimJob(types: $t, waitSeconds: %d) { job { id } } }"
PARTS = ("throughput", "latency", "idle")


def _parts() -> set[str]:
    """The parts QUEUELOG_BENCH_WORKERS names (all when unset)."""
    named = os.environ.get("QUEUELOG_BENCH_WORKERS", "")
    chosen = {p.strip() for p in named.split(",") if p.strip()} or set(PARTS)
    if unknown := chosen - set(PARTS):
        raise SystemExit(f"QUEUELOG_BENCH_WORKERS: unknown parts {sorted(unknown)}")
    return chosen


# -- the worker process ----------------------------------------------------------------


def worker_main(url: str, key: str, job_type: str, concurrency: int) -> None:
    """Run a Worker whose handler returns the time it started, until SIGTERM."""
    worker = Worker(url, key, concurrency=concurrency, types=[job_type], wait_seconds=30)

    @worker.handler(job_type)
    async def started_at(job: RunningJob) -> float:
        return time.time()

    worker.run()


@contextmanager
def worker_process(server: Server, key: str, job_type: str, concurrency: int) -> Iterator[None]:
    cmd = [sys.executable, "-m", "bench.bench_workers", "worker"]
    args = [server.url, key, job_type, str(concurrency)]
    log = server.workdir / f"worker-{server.port}.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([*cmd, *args], stdout=out, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        proc.kill()  # its claim may be waiting: a clean stop would wait for it first
        proc.wait()


# -- queuelog --------------------------------------------------------------------------


async def _completed(admin: AsyncClient, job_type: str) -> int:
    data = await admin.execute(STATS, {"t": job_type})
    return int(data["queueStats"]["completed"])


async def _until_completed(admin: AsyncClient, job_type: str, count: int, limit: float) -> None:
    """Poll `queueStats` until `count` jobs are COMPLETED: every 5 ms near the end, less
    often while the rate so far says the end is far (each poll costs the server CPU that
    the workers' requests would otherwise have)."""
    start = time.perf_counter()
    deadline = start + limit
    first = done = await _completed(admin, job_type)
    while done < count:
        now = time.perf_counter()
        if now > deadline:
            raise RuntimeError(f"{job_type}: fewer than {count} jobs completed in {limit:.0f} s")
        rate = (done - first) / (now - start) if done > first else 0.0
        expected = (count - done) / rate if rate else 0.0
        await asyncio.sleep(min(max(expected / 4, POLL_MIN), POLL_MAX))
        done = await _completed(admin, job_type)


async def _throughput(server: Server, concurrency: int, n: int) -> float:
    producer_key = server.create_key("PRODUCER")
    worker_key = server.create_key("WORKER")
    async with (
        AsyncClient(server.url, producer_key) as producer,
        AsyncClient(server.url, server.admin_key) as admin,
    ):
        before = await _completed(admin, THROUGHPUT_TYPE)  # a smoke's earlier runs
        with worker_process(server, worker_key, THROUGHPUT_TYPE, concurrency):
            await producer.enqueue(THROUGHPUT_TYPE, {"warm": True})
            await _until_completed(admin, THROUGHPUT_TYPE, before + 1, 60)
            t0 = time.perf_counter()
            await asyncio.gather(
                *(
                    producer.enqueue_many(
                        [{"type": THROUGHPUT_TYPE, "payload": {"n": j}} for j in range(size)]
                    )
                    for size in _chunks(n, BATCH)
                )
            )
            await _until_completed(admin, THROUGHPUT_TYPE, before + 1 + n, 120)
            return n / (time.perf_counter() - t0)


def _chunks(n: int, size: int) -> list[int]:
    return [min(size, n - i) for i in range(0, n, size)]


async def _latency(
    server: Server, producer: AsyncClient, worker_key: str, samples: int
) -> dict[str, float]:
    """Enqueue-to-start with one idle long-polling worker, one job at a time."""
    latencies: list[float] = []
    with worker_process(server, worker_key, LATENCY_TYPE, 1):
        for i in range(samples + 1):  # the first only proves the worker is up
            await asyncio.sleep(0.05)  # the worker is back in its waiting claim
            enqueued = time.time()
            job = await producer.enqueue(LATENCY_TYPE, {"n": i})
            await asyncio.sleep(RESULT_AFTER)
            started = await _result(producer, job.id)
            if i:
                latencies.append(started - enqueued)
    return {
        "samples": len(latencies),
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
    }


async def _result(producer: AsyncClient, job_id: str) -> float:
    deadline = time.perf_counter() + 60
    while time.perf_counter() < deadline:
        job = await producer.job(job_id)
        if job is not None and job.result is not None:
            return float(job.result)
        await asyncio.sleep(0.01)
    raise RuntimeError(f"job {job_id} did not complete")


async def _idle_claims(server: Server, worker_key: str, seconds: float) -> dict[str, float]:
    """The server's CPU while IDLE_CLAIMS claims wait on an empty type."""
    wait = int(seconds) + 20
    body = {"query": IDLE_CLAIM % wait, "variables": {"t": [IDLE_TYPE]}}
    limits = httpx.Limits(max_connections=IDLE_CLAIMS + 10)
    headers = {"Authorization": f"Bearer {worker_key}"}
    async with httpx.AsyncClient(limits=limits, timeout=wait + 30, headers=headers) as http:
        claims = [asyncio.create_task(http.post(server.url, json=body)) for _ in range(IDLE_CLAIMS)]
        # Every request has arrived, made its first claim and waits: under load that took
        # over a second, and the window would count arrivals.
        await asyncio.sleep(IDLE_SETTLE)
        early = sum(c.done() for c in claims)
        cpu0, t0 = cpu_seconds(server.pid), time.perf_counter()
        await asyncio.sleep(seconds)
        cpu1, t1 = cpu_seconds(server.pid), time.perf_counter()
        still = sum(not c.done() for c in claims)
        for c in claims:
            c.cancel()
        await asyncio.gather(*claims, return_exceptions=True)
    if early:
        raise RuntimeError(f"{early} of {IDLE_CLAIMS} waiting claims answered early")
    return {
        "claims": IDLE_CLAIMS,
        "waiting_at_end": still,
        "seconds": t1 - t0,
        "cpu_pct": (cpu1 - cpu0) / (t1 - t0) * 100,
    }


# -- huey ------------------------------------------------------------------------------


def huey_main(path: str, n: int, workers: int) -> None:
    """Start huey's consumer with `workers` threads, enqueue n no-op tasks from this
    process, and print jobs/s until the last has run."""
    from huey import SqliteHuey  # type: ignore[import-untyped]
    from huey.consumer import Consumer  # type: ignore[import-untyped]

    huey = SqliteHuey("bench", filename=path, fsync=True)
    done = threading.Semaphore(0)

    @huey.task()  # type: ignore[untyped-decorator]
    def noop(i: int) -> None:
        done.release()

    consumer = Consumer(huey, workers=workers, worker_type="thread", periodic=False)
    consumer.start()
    noop(-1)  # warm-up: the consumer is up
    if not done.acquire(timeout=60):
        raise RuntimeError("huey: the warm-up task did not run")
    t0 = time.perf_counter()
    for i in range(n):
        noop(i)
    for _ in range(n):
        if not done.acquire(timeout=120):
            raise RuntimeError("huey: tasks did not all run")
    print(n / (time.perf_counter() - t0), flush=True)
    consumer.stop(graceful=False)
    os._exit(0)  # the consumer's threads need not wind down


def huey_throughput(workdir: Path, n: int) -> dict[str, float]:
    """huey's jobs/s at each worker count, each run in its own process and database."""
    out: dict[str, float] = {}
    for workers in CONCURRENCIES:
        path = workdir / f"huey-workers-{workers}.db"
        cmd = [sys.executable, "-m", "bench.bench_workers", "huey", str(path), str(n)]
        try:
            done = subprocess.run(
                [*cmd, str(workers)], capture_output=True, text=True, timeout=300, check=True
            )
            out[str(workers)] = float(done.stdout.strip().splitlines()[-1])
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
    return out


# -- the section -----------------------------------------------------------------------


@contextmanager
def _fresh_server(backend: str, workdir: Path) -> Iterator[Server]:
    with database_url(backend, workdir) as url, Server(url, workdir) as server:
        yield server


async def run(backend: str, workdir: Path, smoke: bool) -> dict[str, Any]:
    """Each worker count against a fresh server and database: a worker stopped while its
    claim waits must not take the next run's jobs. The smoke, which times nothing that
    matters, runs every part against one server."""
    n, samples, idle_seconds = (50, 10, 1.0) if smoke else (2_000, 200, 5.0)
    parts = _parts()
    out: dict[str, Any] = {}
    with ExitStack() as stack:
        shared = stack.enter_context(_fresh_server(backend, workdir)) if smoke else None

        def server_for(run: ExitStack) -> Server:
            return shared or run.enter_context(_fresh_server(backend, workdir))

        if "throughput" in parts:
            out.update(jobs=n, enqueue=f"concurrently, batches of {BATCH}", throughput={})
            for concurrency in CONCURRENCIES:
                with ExitStack() as one:
                    throughput = await _throughput(server_for(one), concurrency, n)
                    out["throughput"][str(concurrency)] = throughput
        with ExitStack() as one:
            server = server_for(one)
            producer_key = server.create_key("PRODUCER")
            worker_key = server.create_key("WORKER")
            if "latency" in parts:
                async with AsyncClient(server.url, producer_key) as producer:
                    out["latency"] = await _latency(server, producer, worker_key, samples)
            if "idle" in parts:
                out["idle"] = await _idle_claims(server, worker_key, idle_seconds)
    if backend == "sqlite" and "throughput" in parts:
        huey = await asyncio.to_thread(huey_throughput, workdir, n)
        out["huey"] = huey
        out["ratio"] = {k: out["throughput"][k] / huey[k] for k in huey}
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"] and len(sys.argv) == 6:
        worker_main(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    elif sys.argv[1:2] == ["huey"] and len(sys.argv) == 5:
        huey_main(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(__doc__)
