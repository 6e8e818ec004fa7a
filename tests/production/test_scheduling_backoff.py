"""Scheduling (runAt / delaySeconds) and retry backoff, through the HTTP API."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.production.helpers import CLAIM_MANY, FAIL, Keys, seconds, ts, wait_for
from tests.support import LiveServer


def _codes(payload: dict[str, object]) -> list[tuple[object, object]]:
    errors = payload["userErrors"]
    assert isinstance(errors, list)
    return [(e["code"], e["field"]) for e in errors]


def test_run_at_and_delay_are_validated(prod: LiveServer, job_type: str) -> None:
    keys = Keys.make(prod, job_type)
    now = datetime.now(UTC)
    bad = {
        "both": {"runAt": now.isoformat(), "delaySeconds": 5},
        "far past": {"runAt": (now - timedelta(days=2)).isoformat()},
        "beyond horizon": {"runAt": (now + timedelta(days=400)).isoformat()},
        "delay beyond horizon": {"delaySeconds": 400 * 86_400},
        "negative delay": {"delaySeconds": -1},
    }
    for why, fields in bad.items():
        out = keys.call(
            "mutation($input: EnqueueJobInput!) { enqueueJob(input: $input) {"
            " job { id } userErrors { code field } } }",
            keys.producer,
            input={"type": job_type, **fields},
        )
        assert out["job"] is None, why
        [(code, field)] = _codes(out)
        assert code == "VALIDATION_FAILED", why
        assert field in (["input", "runAt"], ["input", "delaySeconds"]), why
    assert keys.stats()["pending"] == 0  # nothing was enqueued


def test_a_job_is_claimable_only_from_its_run_at(prod: LiveServer, job_type: str) -> None:
    keys = Keys.make(prod, job_type)
    delayed = keys.enqueue(delaySeconds=3, priority="MEDIUM")
    at = keys.enqueue(runAt=(datetime.now(UTC) + timedelta(seconds=3)).isoformat())
    assert seconds(delayed["runAt"], delayed["updatedAt"]) == 3
    assert keys.claim() is None  # both wait, though they are the only jobs of the type
    assert keys.stats()["pending"] == 2
    first = wait_for(keys.claim, 5)
    claimed_at = datetime.fromisoformat(first["claimedAt"])
    assert claimed_at >= datetime.fromisoformat(delayed["runAt"])
    second = wait_for(keys.claim, 5)
    assert {first["id"], second["id"]} == {delayed["id"], at["id"]}
    assert datetime.fromisoformat(second["claimedAt"]) >= datetime.fromisoformat(at["runAt"])


def test_a_recent_past_run_at_counts_as_now(prod: LiveServer, job_type: str) -> None:
    keys = Keys.make(prod, job_type)
    job = keys.enqueue(runAt=(datetime.now(UTC) - timedelta(minutes=5)).isoformat())
    assert seconds(job["runAt"], job["updatedAt"]) == 0
    claimed = keys.claim()
    assert claimed is not None and claimed["id"] == job["id"]


def _fail(keys: Keys, job_id: str, retryable: bool = True) -> dict[str, Any]:
    out = keys.call(FAIL, id=job_id, error="boom", retryable=retryable)
    assert out["userErrors"] == [], out
    return out


def test_backoff_per_type_is_exponential_jittered_and_capped(prod: LiveServer) -> None:
    # [types.backoff]: base 0.25 s, cap 0.6 s: retry n waits uniform [0, min(0.6, 0.25 * 2**n)].
    keys = Keys.make(prod, "backoff")
    ids = [keys.enqueue(maxRetries=10)["id"] for _ in range(5)]
    delays: dict[int, list[float]] = {}
    for n in range(4):
        held = keys.call(CLAIM_MANY, limit=5, types=["backoff"], lease=30)["jobs"]
        held += [wait_for(keys.claim, 2) for _ in range(5 - len(held))]
        assert sorted(j["id"] for j in held) == sorted(ids)
        for job in held:
            assert job["retryCount"] == n
            assert ts(job["claimedAt"]) >= ts(job["runAt"])  # never claimed before its runAt
            out = _fail(keys, job["id"])
            assert out["willRetry"] is True and out["job"]["status"] == "PENDING"
            delay = seconds(out["job"]["runAt"], out["job"]["updatedAt"])
            assert 0 <= delay <= min(0.6, 0.25 * 2**n), (n, delay)
            delays.setdefault(n, []).append(delay)
    assert len(set(delays[0])) > 1  # jittered, not a fixed step
    # The ceiling grows: some later delay exceeds the first ceiling (all 10 below 0.25 s
    # under uniform [0, 0.5|0.6] would be a 1-in-5,000 fluke).
    assert max(delays[2] + delays[3]) > 0.25


def test_server_default_backoff(prod: LiveServer, job_type: str) -> None:
    # QUEUELOG_BACKOFF_BASE_SECONDS=0.1, _MAX_SECONDS=0.3 on this server.
    keys = Keys.make(prod, job_type)
    job = keys.enqueue()
    keys.claim()
    out = _fail(keys, job["id"])
    assert out["job"]["retryCount"] == 1
    assert 0 <= seconds(out["job"]["runAt"], out["job"]["updatedAt"]) <= 0.1


def test_base_zero_retries_at_once(prod: LiveServer) -> None:
    keys = Keys.make(prod, "instant")  # backoff_base_seconds = 0
    job = keys.enqueue(maxRetries=2)
    for attempt in range(2):
        held = keys.claim()
        assert held is not None and held["id"] == job["id"] and held["retryCount"] == attempt
        out = _fail(keys, job["id"])
        assert out["job"]["runAt"] == out["job"]["updatedAt"]
    held = keys.claim()
    assert held is not None
    out = _fail(keys, job["id"])  # retries exhausted
    assert out["willRetry"] is False and out["job"]["status"] == "FAILED"
    assert out["job"]["retryCount"] == 2 and out["job"]["finishedAt"] is not None


def test_fail_not_retryable_fails_at_once(prod: LiveServer, job_type: str) -> None:
    keys = Keys.make(prod, job_type)
    job = keys.enqueue(maxRetries=5)
    keys.claim()
    out = _fail(keys, job["id"], retryable=False)
    assert out["willRetry"] is False
    assert out["job"]["status"] == "FAILED" and out["job"]["retryCount"] == 0
    assert keys.job(job["id"])["error"] == "boom"
    time.sleep(0.3)
    assert keys.claim() is None
