"""throughput(since, until, bucketSeconds, type) through a live server, on both backends:
counts from the job history, per bucket, within the caller's visibility."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.api.attack import COMPLETE, FAIL, claim, enqueued, top_level_codes
from tests.support import ADMIN_SECRET, LiveServer

THROUGHPUT = """query($since: DateTime!, $until: DateTime, $b: Int, $type: String) {
  throughput(since: $since, until: $until, bucketSeconds: $b, type: $type) {
    start enqueued started completed failed retried
  }
}"""
KINDS = ("enqueued", "started", "completed", "failed", "retried")


def _buckets(server: LiveServer, key: str, **variables: Any) -> list[dict[str, Any]]:
    for name in ("since", "until"):
        if isinstance(variables.get(name), datetime):
            variables[name] = variables[name].isoformat()
    return list(server.gql(THROUGHPUT, variables, key)["throughput"])


def _totals(buckets: list[dict[str, Any]]) -> dict[str, int]:
    return {k: sum(b[k] for b in buckets) for k in KINDS}


def test_counts_what_happened(server: LiveServer, job_type: str) -> None:
    since = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=2)
    producer = server.create_key("PRODUCER", [job_type])
    worker = server.create_key("WORKER", [job_type])
    a, b, c = (enqueued(server, producer, type=job_type, maxRetries=3)["id"] for _ in range(3))
    assert claim(server, worker, [job_type])["job"]["id"] == a
    server.gql(COMPLETE, {"id": a}, worker)
    assert claim(server, worker, [job_type])["job"]["id"] == b
    server.gql(FAIL, {"id": b, "error": "again", "retryable": True}, worker)  # back to PENDING
    assert claim(server, worker, [job_type])["job"]["id"] == c  # b waits for its backoff
    server.gql(FAIL, {"id": c, "error": "no", "retryable": False}, worker)
    until = datetime.now(UTC) + timedelta(seconds=2)
    expected = {"enqueued": 3, "started": 3, "completed": 1, "failed": 1, "retried": 1}

    hourly = _buckets(server, ADMIN_SECRET, since=since, until=until, b=3600, type=job_type)
    assert len(hourly) == 1 and hourly[0]["start"] == since.isoformat()
    assert _totals(hourly) == expected
    # One-second buckets: every bucket from since to until, counted once each.
    secondly = _buckets(server, ADMIN_SECRET, since=since, until=until, b=1, type=job_type)
    span = until - since
    assert len(secondly) == -(-span // timedelta(seconds=1))
    starts = [datetime.fromisoformat(x["start"]) for x in secondly]
    assert starts == [since + timedelta(seconds=i) for i in range(len(secondly))]
    assert _totals(secondly) == expected
    # The producer sees its own; another producer and a viewer see as their roles do.
    assert _totals(_buckets(server, producer, since=since, until=until, type=job_type)) == expected
    other = server.create_key("PRODUCER", [job_type])
    nothing = dict.fromkeys(KINDS, 0)
    assert _totals(_buckets(server, other, since=since, until=until, type=job_type)) == nothing
    viewer = server.create_key("VIEWER")
    assert _totals(_buckets(server, viewer, since=since, until=until, type=job_type)) == expected


def test_until_defaults_to_now(server: LiveServer, job_type: str) -> None:
    since = datetime.now(UTC) - timedelta(minutes=10)
    enqueued(server, ADMIN_SECRET, type=job_type)
    buckets = _buckets(server, ADMIN_SECRET, since=since, type=job_type)
    assert len(buckets) in (10, 11) and _totals(buckets)["enqueued"] == 1


@pytest.mark.parametrize(
    ("since_ago", "until_ago", "bucket"),
    [
        (timedelta(hours=1), None, 0),
        (timedelta(hours=1), None, 86_401),
        (timedelta(days=2), None, 60),  # 2,880 buckets
        (timedelta(hours=1), timedelta(hours=2), 60),  # until before since
    ],
)
def test_refuses_absurd_ranges(
    server: LiveServer, since_ago: timedelta, until_ago: timedelta | None, bucket: int
) -> None:
    now = datetime.now(UTC)
    variables: dict[str, Any] = {"since": (now - since_ago).isoformat(), "b": bucket}
    if until_ago is not None:
        variables["until"] = (now - until_ago).isoformat()
    body = server.post(THROUGHPUT, variables, ADMIN_SECRET).json()
    assert top_level_codes(body) == ["BAD_USER_INPUT"], body
