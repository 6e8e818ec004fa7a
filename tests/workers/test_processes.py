"""`queuelog worker` processes against live servers on both backends: every job completed
exactly once, a killed worker's jobs run elsewhere, SIGTERM drains, a server restart loses
and duplicates nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import LiveServer

ROOT = Path(__file__).resolve().parents[2]
TARGET = "tests.workers.sample_worker:worker"
JOBS = """query($type: String, $after: String) {
  jobs(type: $type, first: 100, after: $after) {
    nodes { id status workerId retryCount events(first: 20) { previousStatus status } }
    pageInfo { hasNextPage endCursor } } }"""


class Workers:
    """`queuelog worker` processes started by one test, all stopped at its end."""

    def __init__(self, server: LiveServer, job_type: str, tmp_path: Path) -> None:
        self.server, self.job_type, self.tmp_path = server, job_type, tmp_path
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(self, key: str, *args: str, **env: str) -> subprocess.Popen[bytes]:
        full = {k: v for k, v in os.environ.items() if not k.startswith(("QUEUELOG_", "SAMPLE_"))}
        full.update(
            QUEUELOG_URL=self.server.url, QUEUELOG_KEY=key, SAMPLE_TYPE=self.job_type, **env
        )
        log = self.tmp_path / f"worker-{len(self.procs)}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "queuelog.cli", "worker", TARGET, *args],
                cwd=ROOT, env=full, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        self.procs.append((proc, log))
        return proc

    def log(self, proc: subprocess.Popen[bytes]) -> str:
        return next(log.read_text() for p, log in self.procs if p is proc)

    def stop_all(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def workers(server: LiveServer, job_type: str, tmp_path: Path) -> Iterator[Workers]:
    w = Workers(server, job_type, tmp_path)
    try:
        yield w
    finally:
        w.stop_all()


def enqueue(server: LiveServer, key: str, job_type: str, payloads: list[dict[str, Any]]) -> None:
    query = """mutation($inputs: [EnqueueJobInput!]!) {
      enqueueJobs(inputs: $inputs) { jobs { id } userErrors { code message } } }"""
    for i in range(0, len(payloads), 500):
        inputs = [{"type": job_type, "payload": p} for p in payloads[i : i + 500]]
        out = server.gql(query, {"inputs": inputs}, key)["enqueueJobs"]
        assert not out["userErrors"], out


def all_jobs(server: LiveServer, job_type: str) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = []
    after = None
    while True:
        page = server.gql(JOBS, {"type": job_type, "after": after}, server.admin_key)["jobs"]
        jobs.extend(page["nodes"])
        if not page["pageInfo"]["hasNextPage"]:
            return jobs
        after = page["pageInfo"]["endCursor"]


def wait_for(server: LiveServer, job_type: str, status: str, n: int, seconds: float = 120) -> None:
    query = "query($t: String) { queueStats(type: $t) { pending running completed failed } }"
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        stats = server.gql(query, {"t": job_type}, server.admin_key)["queueStats"]
        if stats[status.lower()] >= n:
            return
        time.sleep(0.2)
    raise AssertionError(f"not {n} {status} jobs after {seconds}s: {stats}")


def completions(job: dict[str, Any]) -> int:
    return sum(e["status"] == "COMPLETED" for e in job["events"])


def test_two_workers_complete_600_jobs_each_exactly_once(
    server: LiveServer, workers: Workers, job_type: str
) -> None:
    n = 600  # 16 handlers in two processes: every job's claim races the others' many times
    producer = server.create_key("PRODUCER", [job_type])
    worker_key = server.create_key("WORKER", [job_type])
    a = workers.start(worker_key, "--concurrency", "8")
    b = workers.start(worker_key, "--concurrency", "8", "--types", job_type, "--prefetch", "0")
    enqueue(server, producer, job_type, [{"n": i} for i in range(n)])
    wait_for(server, job_type, "COMPLETED", n)
    jobs = all_jobs(server, job_type)
    assert len(jobs) == n and {j["status"] for j in jobs} == {"COMPLETED"}
    once = [(None, "PENDING"), ("PENDING", "RUNNING"), ("RUNNING", "COMPLETED")]
    assert all([(e["previousStatus"], e["status"]) for e in j["events"]] == once for j in jobs)
    for proc in (a, b):
        proc.send_signal(signal.SIGTERM)
    assert (a.wait(30), b.wait(30)) == (0, 0)
    logged = workers.log(a) + workers.log(b)
    assert logged.count(f" {job_type} COMPLETED (after ") == n  # one line per outcome


def test_a_killed_worker_s_jobs_run_again_on_another_after_its_lease(
    server: LiveServer, workers: Workers, job_type: str
) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    doomed_key = server.create_key("WORKER", [job_type], name=server.unique_name("doomed"))
    other_key = server.create_key("WORKER", [job_type], name=server.unique_name("other"))
    doomed = workers.start(doomed_key, SAMPLE_HANG="1", SAMPLE_LEASE="2")
    enqueue(server, producer, job_type, [{"hang": True}, {"hang": True}])
    wait_for(server, job_type, "RUNNING", 2)
    doomed.kill()
    doomed.wait()
    workers.start(other_key)
    wait_for(server, job_type, "COMPLETED", 2, seconds=60)
    jobs = all_jobs(server, job_type)
    for job in jobs:
        statuses = [e["status"] for e in job["events"]]
        assert statuses == ["PENDING", "RUNNING", "PENDING", "RUNNING", "COMPLETED"], statuses
        assert job["retryCount"] == 1 and job["workerId"].startswith("other")


def test_sigterm_drains_running_jobs_and_exits_0(
    server: LiveServer, workers: Workers, job_type: str
) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    proc = workers.start(server.create_key("WORKER", [job_type]))
    enqueue(server, producer, job_type, [{"sleep": 1.5}, {"sleep": 1.5}])
    wait_for(server, job_type, "RUNNING", 2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert {j["status"] for j in all_jobs(server, job_type)} == {"COMPLETED"}


def test_sigterm_while_the_claim_waits_cuts_it_and_takes_no_job(
    server: LiveServer, workers: Workers, job_type: str
) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    proc = workers.start(server.create_key("WORKER", [job_type]), SAMPLE_WAIT="60")
    enqueue(server, producer, job_type, [{"n": 0}])
    wait_for(server, job_type, "COMPLETED", 1)
    time.sleep(0.5)  # back in a claim that would wait 60 s
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(15) == 0  # the server would answer the claim only after 28 s
    enqueue(server, producer, job_type, [{"n": 1}])
    time.sleep(1.0)  # a claim still waiting on the server would have taken it by now
    statuses = sorted(j["status"] for j in all_jobs(server, job_type))
    assert statuses == ["COMPLETED", "PENDING"]


def test_after_the_grace_period_running_jobs_fail_as_retryable(
    server: LiveServer, workers: Workers, job_type: str
) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    proc = workers.start(server.create_key("WORKER", [job_type]), SAMPLE_GRACE="0.5")
    enqueue(server, producer, job_type, [{"sleep": 600}])
    wait_for(server, job_type, "RUNNING", 1)
    began = time.monotonic()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 0
    assert time.monotonic() - began < 15
    [job] = all_jobs(server, job_type)
    assert (job["status"], job["retryCount"]) == ("PENDING", 1)
    assert " FAILED, will retry (after " in workers.log(proc)


def test_a_second_signal_exits_at_once(server: LiveServer, workers: Workers, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    proc = workers.start(server.create_key("WORKER", [job_type]))
    enqueue(server, producer, job_type, [{"sleep": 600}])
    wait_for(server, job_type, "RUNNING", 1)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert proc.poll() is None  # draining: the job has 30 s
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) != 0


def test_a_server_restart_in_the_middle_loses_and_duplicates_nothing(
    own_server: LiveServer, tmp_path: Path
) -> None:
    server, job_type, n = own_server, "email", 400
    producer = server.create_key("PRODUCER", [job_type])
    worker_key = server.create_key("WORKER", [job_type])
    workers = Workers(server, job_type, tmp_path)
    try:
        # A short lease: a claim whose answer the restart cut off comes back within seconds.
        for _ in range(2):
            workers.start(worker_key, "--concurrency", "8", SAMPLE_LEASE="3")
        enqueue(server, producer, job_type, [{"n": i, "sleep": 0.02} for i in range(n)])
        wait_for(server, job_type, "COMPLETED", n // 4)
        server.stop()
        time.sleep(1)
        server.start()
        wait_for(server, job_type, "COMPLETED", n)
        jobs = all_jobs(server, job_type)
        assert len(jobs) == n
        assert Counter(j["status"] for j in jobs) == {"COMPLETED": n}
        assert all(completions(j) == 1 for j in jobs)
        assert all(proc.poll() is None for proc, _ in workers.procs)  # they rode it out
    finally:
        workers.stop_all()
