"""GET /metrics through a live server, parsed by prometheus_client's own parser: the job
gauges are the jobs table's counts, the per-process counters follow what the API did, and
only an admin key (or QUEUELOG_METRICS_PUBLIC) may read them."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families

from queuelog.runtime import Services
from queuelog.storage.postgresql.dialect import MARKS
from queuelog.storage.tables import jobs
from tests.support import LiveServer

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(server: LiveServer, key: str | None) -> Samples:
    url = server.url.replace("/graphql", "/metrics")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient() as client:
        response = await client.get(url, headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            samples[s.name, tuple(sorted(s.labels.items()))] = s.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def gql(server: LiveServer, key: str, query: str, **variables: Any) -> dict[str, Any]:
    async with httpx.AsyncClient() as client:
        response = await client.post(
            server.url,
            json={"query": query, "variables": variables},
            headers={"Authorization": f"Bearer {key}"},
        )
    body = response.json()
    assert "errors" not in body, body
    return dict(body["data"])


ENQUEUE = "mutation($t: String!) { enqueueJob(input: {type: $t, maxRetries: 1}) { job { id } } }"
CLAIM = "mutation($t: String!) { claimJobs(limit: 10, types: [$t]) { jobs { id } } }"
COMPLETE = "mutation($id: ID!) { completeJob(id: $id) { job { status } } }"
FAIL = 'mutation($id: ID!) { failJob(id: $id, error: "boom") { willRetry } }'


async def test_job_gauges_are_the_tables_counts(
    live: tuple[LiveServer, str], services: Services
) -> None:
    server, key = live
    for _ in range(5):
        await gql(server, key, ENQUEUE, t="email")
    await gql(server, key, ENQUEUE, t="pdf")
    claimed = (await gql(server, key, CLAIM, t="email"))["claimJobs"]["jobs"]
    await gql(server, key, COMPLETE, id=claimed[0]["id"])
    await gql(server, key, FAIL, id=claimed[1]["id"])  # retried: pending again

    def table(tx: Any) -> Counter[tuple[str, str]]:
        rows = tx.conn.execute(sa.select(jobs.c.type, jobs.c.status)).all()
        return Counter((r.type, r.status) for r in rows)

    counts = await services.db.read(table)
    samples = await scrape(server, key)
    gauges = {
        dict(labels)["type"] + "/" + dict(labels)["status"]: v
        for (name, labels), v in samples.items()
        if name == "queuelog_jobs"
    }
    expected = {f"{t}/{s}": float(n) for (t, s), n in counts.items()}
    assert {k: v for k, v in gauges.items() if v} == expected
    assert expected == {"email/pending": 1.0, "email/running": 3.0, "email/completed": 1.0,
                        "pdf/pending": 1.0}  # fmt: skip
    # every configured type and status is there, zero where there are none
    assert gauges["sync/failed"] == 0.0


async def test_counters_follow_what_the_api_did(live: tuple[LiveServer, str]) -> None:
    server, key = live
    before = await scrape(server, key)
    for _ in range(3):
        await gql(server, key, ENQUEUE, t="sync")
    claimed = (await gql(server, key, CLAIM, t="sync"))["claimJobs"]["jobs"]
    await gql(server, key, COMPLETE, id=claimed[0]["id"])
    assert (await gql(server, key, FAIL, id=claimed[1]["id"]))["failJob"]["willRetry"]
    async with httpx.AsyncClient() as client:  # a refused document
        await client.post(server.url, json={"query": "{ nope }"})
    after = await scrape(server, key)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("queuelog_jobs_enqueued_total", type="sync") == 3
    assert delta("queuelog_jobs_claimed_total", type="sync") == 3
    assert delta("queuelog_jobs_completed_total", type="sync") == 1
    assert delta("queuelog_jobs_retried_total", type="sync") == 1
    assert delta("queuelog_jobs_failed_total", type="sync") == 0
    assert delta("queuelog_job_wait_seconds_count", type="sync") == 3
    assert delta("queuelog_job_run_seconds_count", type="sync") == 2
    assert delta("queuelog_graphql_requests_total", operation="enqueueJob", outcome="ok") == 3
    assert delta("queuelog_graphql_requests_total", operation="claimJobs", outcome="ok") == 1
    assert delta("queuelog_graphql_requests_total", operation="invalid", outcome="rejected") == 1
    assert delta("queuelog_graphql_request_seconds_count", operation="completeJob") == 1
    assert ("queuelog_subscriptions", ()) in after


async def test_a_repeated_ack_is_counted_once(live: tuple[LiveServer, str]) -> None:
    """completeJob and failJob repeated by the holding worker answer as the first did (its
    answer may have been lost): the job was settled once, so it is counted once."""
    server, key = live
    before = await scrape(server, key)
    for _ in range(3):
        await gql(server, key, ENQUEUE, t="email")
    done, gone, again = (await gql(server, key, CLAIM, t="email"))["claimJobs"]["jobs"]
    fail_for_good = 'mutation($id: ID!) { failJob(id: $id, error: "x", retryable: false) ' \
        "{ willRetry userErrors { code } } }"  # fmt: skip
    retry = (
        'mutation($id: ID!) { failJob(id: $id, error: "boom") { willRetry userErrors { code } } }'
    )
    complete = "mutation($id: ID!) { completeJob(id: $id) { job { status } userErrors { code } } }"
    for _ in range(3):
        answer = (await gql(server, key, complete, id=done["id"]))["completeJob"]
        assert answer == {"job": {"status": "COMPLETED"}, "userErrors": []}
        answer = (await gql(server, key, fail_for_good, id=gone["id"]))["failJob"]
        assert answer == {"willRetry": False, "userErrors": []}
        answer = (await gql(server, key, retry, id=again["id"]))["failJob"]
        assert answer == {"willRetry": True, "userErrors": []}
    after = await scrape(server, key)

    def delta(name: str) -> float:
        return value(after, name, type="email") - value(before, name, type="email")

    assert delta("queuelog_jobs_completed_total") == 1
    assert delta("queuelog_jobs_failed_total") == 1
    assert delta("queuelog_jobs_retried_total") == 1
    assert delta("queuelog_job_run_seconds_count") == 3


async def test_paused_types_are_the_databases(live: tuple[LiveServer, str]) -> None:
    server, key = live

    def paused(samples: Samples) -> dict[str, float]:
        return {t: value(samples, "queuelog_job_type_paused", type=t) for t in ("email", "pdf")}

    assert paused(await scrape(server, key)) == {"email": 0.0, "pdf": 0.0}
    await gql(server, key, 'mutation { pauseJobType(type: "pdf") { jobType { paused } } }')
    assert paused(await scrape(server, key)) == {"email": 0.0, "pdf": 1.0}
    await gql(server, key, 'mutation { resumeJobType(type: "pdf") { jobType { paused } } }')
    assert paused(await scrape(server, key)) == {"email": 0.0, "pdf": 0.0}


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_an_expired_lease_is_counted(
    live: tuple[LiveServer, str], services: Services
) -> None:
    server, key = live
    before = await scrape(server, key)
    await gql(server, key, ENQUEUE, t="pdf")
    lease = 'mutation { claimJobs(limit: 1, types: ["pdf"], leaseSeconds: 1) { jobs { id } } }'
    assert (await gql(server, key, lease))["claimJobs"]["jobs"]

    def expire(tx: Any) -> None:
        tx.conn.execute(sa.update(jobs).values(lease_expires_at=sa.func.datetime("now", "-1 day")))

    await services.db.write(expire)
    assert await services.service.rescue_expired() == 1
    after = await scrape(server, key)
    for name in ("queuelog_leases_expired_total", "queuelog_jobs_retried_total"):
        assert value(after, name, type="pdf") - value(before, name, type="pdf") == 1


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_metrics_need_an_admin_or_viewer_key(live: tuple[LiveServer, str]) -> None:
    server, key = live
    url = server.url.replace("/graphql", "/metrics")
    made = await gql(
        server,
        key,
        'mutation { w: createApiKey(input: {name: "w", role: WORKER}) { secret } '
        'v: createApiKey(input: {name: "v", role: VIEWER}) { secret } }',
    )
    async with httpx.AsyncClient() as client:
        anonymous = await client.get(url)
        assert anonymous.status_code == 401
        assert "an admin or viewer key" in anonymous.text
        headers = {"Authorization": f"Bearer {made['w']['secret']}"}
        refused = await client.get(url, headers=headers)
        assert refused.status_code == 403
        assert "this needs an admin or viewer key; yours is a worker key" in refused.text
        assert (await client.get(url, headers={"Authorization": f"Bearer {key}"})).is_success
        viewer = {"Authorization": f"Bearer {made['v']['secret']}"}
        assert (await client.get(url, headers=viewer)).is_success


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_metrics_public_needs_no_key(tmp_path: Path, db_url: str) -> None:
    extra = {"QUEUELOG_METRICS_PUBLIC": "true"}
    with LiveServer(db_url, tmp_path, env_extra=extra) as server:
        response = httpx.get(server.url.replace("/graphql", "/metrics"))
    assert response.status_code == 200
    names = {f.name for f in text_string_to_metric_families(response.text)}
    assert {"queuelog_jobs", "queuelog_jobs_enqueued", "queuelog_subscriptions"} <= names


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_multiprocess_mode_sums_every_process(tmp_path: Path, db_url: str) -> None:
    """Two servers sharing PROMETHEUS_MULTIPROC_DIR: a scrape of either counts the jobs
    both enqueued."""
    shared = tmp_path / "prom"
    shared.mkdir()
    extra = {"PROMETHEUS_MULTIPROC_DIR": str(shared), "QUEUELOG_METRICS_PUBLIC": "true"}
    with (
        LiveServer(db_url, tmp_path, env_extra=extra) as a,
        LiveServer(db_url, tmp_path, env_extra=extra) as b,
    ):
        for server in (a, b):
            server.gql(ENQUEUE, {"t": "email"}, server.admin_key)
        response = httpx.get(a.url.replace("/graphql", "/metrics"))
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(response.text)
        for s in f.samples
    }
    assert value(samples, "queuelog_jobs_enqueued_total", type="email") == 2
    assert value(samples, "queuelog_jobs", type="email", status="pending") == 2


async def test_the_feed_lag_is_the_age_of_the_oldest_transaction_appending_events(
    live: tuple[LiveServer, str], services: Services
) -> None:
    """While a transaction holds its mark (it is appending events), the feed's readers
    wait for it: the gauge shows its age; once it ends, 0. SQLite's one writer: always 0."""
    server, key = live
    lag = "queuelog_event_feed_lag_seconds"
    assert value(await scrape(server, key), lag) == 0.0
    if services.db.sql.name != "postgresql":
        return
    with services.db.writer.connect() as conn:
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock_shared({MARKS} + 1)")
        await asyncio.sleep(0.2)
        assert value(await scrape(server, key), lag) >= 0.2
        conn.rollback()
    assert value(await scrape(server, key), lag) == 0.0
