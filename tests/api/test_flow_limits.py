"""Flow limits through the API of live servers, on SQLite and PostgreSQL: concurrent claims
never pass maxRunning or maxRunningPerKey, a rate limit caps a burst, waiting claims wake
when a place frees up (also under a limit set while they wait) or a type is resumed, the
TOML file seeds limits once, and two replicas on one PostgreSQL share one limit."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.api.test_job_types import JOB_TYPES, LIMITS, PAUSE, RESUME, enqueue
from tests.support import LiveServer

CLAIM = """mutation($t: [String!], $w: Int) { claimJob(types: $t, waitSeconds: $w) {
  job { id concurrencyKey } userErrors { code } } }"""
CLAIM_MANY = """mutation($t: [String!], $n: Int!) { claimJobs(types: $t, limit: $n) {
  jobs { id concurrencyKey } userErrors { code } } }"""
COMPLETE = "mutation($id: ID!) { completeJob(id: $id) { job { status } userErrors { code } } }"
TIMES = """query($t: String) { jobs(type: $t, first: 10) { nodes { id claimedAt finishedAt } } }"""
RUNNING = """query($t: String) { jobs(type: $t, status: RUNNING, first: 100) { nodes { id } } }"""
RACERS = 12


def set_limits(server: LiveServer, job_type: str, **limits: Any) -> None:
    out = server.gql(LIMITS, {"t": job_type, "l": limits}, server.admin_key)
    assert out["setJobTypeLimits"]["userErrors"] == [], out


def claim_burst(server: LiveServer, key: str, job_type: str) -> list[dict[str, Any]]:
    """RACERS claims at once, half claimJob, half claimJobs(limit: 10); the jobs they got."""

    def one(i: int) -> list[dict[str, Any]]:
        if i % 2:
            out = server.gql(CLAIM_MANY, {"t": [job_type], "n": 10}, key)["claimJobs"]
            return list(out["jobs"])
        got = server.gql(CLAIM, {"t": [job_type]}, key)["claimJob"]["job"]
        return [] if got is None else [got]

    with ThreadPoolExecutor(RACERS) as pool:
        return [j for jobs in pool.map(one, range(RACERS)) for j in jobs]


def running(server: LiveServer, job_type: str) -> int:
    return len(server.gql(RUNNING, {"t": job_type}, server.admin_key)["jobs"]["nodes"])


def test_concurrent_claims_never_pass_max_running(server: LiveServer, job_type: str) -> None:
    worker = server.create_key("WORKER", [job_type])
    set_limits(server, job_type, maxRunning=3)
    for _ in range(20):
        enqueue(server, server.admin_key, type=job_type)
    got = claim_burst(server, worker, job_type)
    assert len(got) == 3 and running(server, job_type) == 3
    assert claim_burst(server, worker, job_type) == []
    done = server.gql(COMPLETE, {"id": got[0]["id"]}, worker)["completeJob"]
    assert done["userErrors"] == []
    again = claim_burst(server, worker, job_type)
    assert len(again) == 1 and running(server, job_type) == 3


def test_concurrent_claims_never_pass_max_running_per_key(
    server: LiveServer, job_type: str
) -> None:
    admin, worker = server.admin_key, server.create_key("WORKER", [job_type])
    set_limits(server, job_type, maxRunningPerKey=2)
    for key in ["a"] * 8 + ["b"] * 8:
        enqueue(server, admin, type=job_type, concurrencyKey=key)
    for _ in range(3):
        enqueue(server, admin, type=job_type)  # no key: not subject to it
    got = claim_burst(server, worker, job_type)
    keys = sorted(str(j["concurrencyKey"]) for j in got)
    assert keys == ["None"] * 3 + ["a", "a", "b", "b"]


def test_a_rate_limit_caps_a_burst(server: LiveServer, job_type: str) -> None:
    worker = server.create_key("WORKER", [job_type])
    set_limits(server, job_type, maxStartsPerSecond=0.001)  # a token every 1,000 s
    for _ in range(5):
        enqueue(server, server.admin_key, type=job_type)
    assert len(claim_burst(server, worker, job_type)) == 1  # burst = max(1, rate)
    set_limits(server, job_type, maxStartsPerSecond=3)  # a new rate starts full
    assert len(claim_burst(server, worker, job_type)) == 3


def test_a_waiting_claim_wakes_when_a_place_frees_up(server: LiveServer, job_type: str) -> None:
    worker = server.create_key("WORKER", [job_type])
    set_limits(server, job_type, maxRunning=1)
    first = enqueue(server, server.admin_key, type=job_type)
    second = enqueue(server, server.admin_key, type=job_type)
    assert server.gql(CLAIM, {"t": [job_type]}, worker)["claimJob"]["job"]["id"] == first["id"]
    with ThreadPoolExecutor(1) as pool:
        start = time.monotonic()
        waiting = pool.submit(server.gql, CLAIM, {"t": [job_type], "w": 20}, worker)
        time.sleep(0.5)  # the claim is waiting (it would wait 20 s for nothing)
        server.gql(COMPLETE, {"id": first["id"]}, worker)
        got = waiting.result(timeout=30)["claimJob"]["job"]
        assert got is not None and got["id"] == second["id"]
        assert time.monotonic() - start < 15  # woken, not timed out


def test_a_claim_waiting_since_before_a_limit_wakes_when_a_place_frees_up(
    sibling: LiveServer, job_type: str
) -> None:
    """The limit is set while the claim waits: it hears of the change and so wakes when
    the running job ends. On a server whose claims never recheck on their own (`sibling`),
    the job reaches the claim only by those wakes, and not before the place is free."""
    server = sibling
    worker = server.create_key("WORKER", [job_type])
    first = enqueue(server, server.admin_key, type=job_type)
    assert server.gql(CLAIM, {"t": [job_type]}, worker)["claimJob"]["job"]["id"] == first["id"]
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(server.gql, CLAIM, {"t": [job_type], "w": 20}, worker)
        time.sleep(0.5)  # it waits, its type not limited
        set_limits(server, job_type, maxRunning=1)
        second = enqueue(server, server.admin_key, type=job_type)  # wakes it: no place
        server.gql(COMPLETE, {"id": first["id"]}, worker)
        got = waiting.result(timeout=30)["claimJob"]["job"]
        assert got is not None and got["id"] == second["id"]
    jobs = server.gql(TIMES, {"t": job_type}, server.admin_key)["jobs"]["nodes"]
    at = {j["id"]: j for j in jobs}
    freed = datetime.fromisoformat(at[first["id"]]["finishedAt"])
    assert datetime.fromisoformat(at[second["id"]]["claimedAt"]) >= freed


def test_a_waiting_claim_wakes_when_its_type_is_resumed(server: LiveServer, job_type: str) -> None:
    worker = server.create_key("WORKER", [job_type])
    server.gql(PAUSE, {"t": job_type}, server.admin_key)
    job = enqueue(server, server.admin_key, type=job_type)
    with ThreadPoolExecutor(1) as pool:
        start = time.monotonic()
        waiting = pool.submit(server.gql, CLAIM, {"t": [job_type], "w": 20}, worker)
        time.sleep(0.5)
        server.gql(RESUME, {"t": job_type}, server.admin_key)
        got = waiting.result(timeout=30)["claimJob"]["job"]
        assert got is not None and got["id"] == job["id"]
        assert time.monotonic() - start < 15


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_the_toml_file_seeds_limits_and_the_api_change_survives_a_restart(
    tmp_path: Path, db_url: str
) -> None:
    cfg = tmp_path / "queuelog.toml"
    cfg.write_text("[types.email]\nmax_running = 2\nmax_starts_per_second = 5.0\n")
    extra = {"QUEUELOG_CONFIG": str(cfg)}

    def email(server: LiveServer) -> dict[str, Any]:
        (found,) = [
            t for t in server.gql(JOB_TYPES, None, server.admin_key)["jobTypes"]
            if t["name"] == "email"
        ]  # fmt: skip
        return dict(found["limits"])

    with LiveServer(db_url, tmp_path, env_extra=extra) as server:
        assert email(server) == {"maxRunning": 2, "maxRunningPerKey": None,
                                 "maxStartsPerSecond": 5.0}  # fmt: skip
        set_limits(server, "email", maxRunning=7)
    with LiveServer(db_url, tmp_path, env_extra=extra) as server:
        assert email(server) == {"maxRunning": 7, "maxRunningPerKey": None,
                                 "maxStartsPerSecond": None}  # fmt: skip


@pytest.mark.parametrize("server", ["postgresql"], indirect=True)
def test_two_replicas_share_one_limit_and_one_pause(
    server: LiveServer, sibling: LiveServer, job_type: str
) -> None:
    """b (`sibling`) never rechecks waiting claims on its own: its waiting claim gets a job
    only by hearing a's resume (NOTIFY)."""
    a, b = server, sibling
    worker = a.create_key("WORKER", [job_type])
    set_limits(a, job_type, maxRunning=4)
    for _ in range(30):
        enqueue(a, a.admin_key, type=job_type)

    def one(i: int) -> int:
        server = (a, b)[i % 2]
        out = server.gql(CLAIM_MANY, {"t": [job_type], "n": 3}, worker)["claimJobs"]
        return len(out["jobs"])

    with ThreadPoolExecutor(16) as pool:
        assert sum(pool.map(one, range(32))) == 4
    assert running(a, job_type) == 4
    a.gql(PAUSE, {"t": job_type}, a.admin_key)
    set_limits(a, job_type)  # no limits, but still paused
    assert b.gql(CLAIM, {"t": [job_type]}, worker)["claimJob"]["job"] is None
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(b.gql, CLAIM, {"t": [job_type], "w": 20}, worker)
        time.sleep(0.5)  # it waits (if not yet, it finds the type resumed at once)
        a.gql(RESUME, {"t": job_type}, a.admin_key)
        assert waiting.result(timeout=30)["claimJob"]["job"] is not None
