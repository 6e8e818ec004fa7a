"""`throughput` stays within its bounds whatever it is asked: a `since` off the minute is
served from the per-minute rollups as one on the minute is (only the minutes its buckets'
edges cut are counted event by event, at most EVENT_MINUTES_MAX of them), and the query
cost limit charges the lists without a size (`throughput`, `schedules`, `apiKeys`) by the
work they do. Through live servers, on both backends where the database matters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from queuelog.service.throughput import EVENT_MINUTES_MAX
from tests.api.attack import top_level_codes
from tests.support import ADMIN_SECRET, LiveServer

THROUGHPUT = """query($since: DateTime!, $until: DateTime, $b: Int, $type: String) {
  throughput(since: $since, until: $until, bucketSeconds: $b, type: $type) {
    start enqueued started } }"""
ENQUEUE = "mutation($t: String!) { enqueueJob(input: {type: $t}) { job { id } } }"
CLAIM = "mutation($t: [String!]) { claimJob(types: $t) { job { id } } }"


def _ask(server: LiveServer, key: str, since: datetime, until: datetime, b: int, t: str) -> Any:
    variables = {"since": since.isoformat(), "until": until.isoformat(), "b": b, "type": t}
    return server.post(THROUGHPUT, variables, key).json()


def test_a_since_off_the_minute_is_served_and_counts_right(
    server: LiveServer, job_type: str
) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    worker = server.create_key("WORKER", [job_type])
    for _ in range(3):
        server.gql(ENQUEUE, {"t": job_type}, producer)
    server.gql(CLAIM, {"t": [job_type]}, worker)
    now = datetime.now(UTC)
    # A day of half-hour buckets from a `since` 17.25 s past a minute, ending after now.
    since = now.replace(second=17, microsecond=250_000) - timedelta(days=1) + timedelta(minutes=5)
    body = _ask(server, producer, since, since + timedelta(days=1), 1800, job_type)
    assert "errors" not in body, body
    buckets = body["data"]["throughput"]
    assert len(buckets) == 48
    assert datetime.fromisoformat(buckets[0]["start"]) == since
    assert sum(b["enqueued"] for b in buckets) == 3
    assert sum(b["started"] for b in buckets) == 1
    # The same from the admin, and with a whole day of minutes on the minute.
    on_minute = now.replace(second=0, microsecond=0) - timedelta(days=1) + timedelta(minutes=5)
    body = _ask(server, ADMIN_SECRET, on_minute, on_minute + timedelta(days=1), 60, job_type)
    assert sum(b["enqueued"] for b in body["data"]["throughput"]) == 3


def test_reads_that_would_count_too_much_history_event_by_event_are_refused(
    server: LiveServer, job_type: str
) -> None:
    """A day of one-minute buckets from a `since` off the minute cuts every minute; a
    worker's key (rollups keep no worker) counts its whole range event by event."""
    worker = server.create_key("WORKER", [job_type])
    since = datetime.now(UTC).replace(second=30) - timedelta(days=1)
    for key, start, span, b in (
        (ADMIN_SECRET, since, timedelta(days=1), 60),
        (worker, since.replace(second=0), timedelta(days=1), 1800),
        (ADMIN_SECRET, since, timedelta(hours=4), 10),
    ):
        body = _ask(server, key, start, start + span, b, job_type)
        assert top_level_codes(body) == ["BAD_USER_INPUT"], body
        message = body["errors"][0]["message"]
        assert f"the limit is {EVENT_MINUTES_MAX}" in message and "whole minute" in message
    # Within the limit, each of those is served.
    for key, start, span, b in (
        (ADMIN_SECRET, since, timedelta(hours=1), 60),
        (worker, since.replace(second=0), timedelta(hours=2), 1800),
        (ADMIN_SECRET, since, timedelta(minutes=24), 1),
    ):
        body = _ask(server, key, start, start + span, b, job_type)
        assert "errors" not in body, body


def test_lists_without_a_size_are_costed_by_their_work(edge: LiveServer) -> None:
    """Each `throughput` costs its most buckets' reads (5,760 of the shipped 20,000), each
    `apiKeys` and `schedules` a table's (1,000): three of the first and one of each other
    pass; fifteen `throughput` aliases, or one more list beside the three, are refused
    before anything runs."""
    since = (datetime.now(UTC) - timedelta(hours=23)).replace(second=0, microsecond=0)
    thr = f'throughput(since: "{since.isoformat()}") {{ enqueued }}'

    def document(throughputs: int, keys: int, schedules: int) -> str:
        fields = [f"t{i}: {thr}" for i in range(throughputs)]
        fields += [f"k{i}: apiKeys {{ name }}" for i in range(keys)]
        fields += [f"s{i}: schedules {{ name }}" for i in range(schedules)]
        return "{ " + " ".join(fields) + " }"

    passed = edge.post(document(3, 1, 1), key=ADMIN_SECRET).json()
    assert "errors" not in passed, passed
    for refused in (document(15, 0, 0), document(3, 2, 1), document(3, 1, 2)):
        body = edge.post(refused, key=ADMIN_SECRET).json()
        assert top_level_codes(body) == ["QUERY_TOO_COMPLEX"], body
        assert body["errors"][0]["extensions"]["limit"] == "maxCost"
