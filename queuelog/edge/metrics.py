"""Prometheus metrics, served at GET /metrics in the text format.

Two kinds: the job gauges `queuelog_jobs{type,status}` and `queuelog_job_type_paused{type}`,
and `queuelog_event_feed_lag_seconds` (`events.lag`), are the database's, read at each
scrape, so every replica reports the same numbers; everything else is this process's own
(jobs it enqueued, claimed, settled; GraphQL requests it answered; subscriptions it
holds). When several processes serve (PROMETHEUS_MULTIPROC_DIR set before start, as
prometheus_client's multiprocess mode asks), a scrape of any of them sums every
process's.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Generic, NamedTuple, TypeVar

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from queuelog.auth.backend import Principal
from queuelog.auth.permissions import refusal
from queuelog.domain.codes import ErrorCode
from queuelog.domain.lifecycle import Status
from queuelog.domain.roles import Capability, may, who_may
from queuelog.runtime import Services
from queuelog.service.models import Job
from queuelog.service.observer import Expired, JobObserver
from queuelog.storage import counts as counts_sql
from queuelog.storage import events as events_sql
from queuelog.storage import job_types as types_sql
from queuelog.storage.tx import Tx

MULTIPROCESS_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR")

# Job times run from seconds to days; requests from a millisecond to the execution timeout.
JOB_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 86400)
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

REGISTRY = CollectorRegistry()  # this process's metrics (single-process mode)
ENQUEUED = Counter("queuelog_jobs_enqueued", "Jobs enqueued", ["type"], registry=REGISTRY)
CLAIMED = Counter("queuelog_jobs_claimed", "Jobs claimed by workers", ["type"], registry=REGISTRY)
COMPLETED = Counter("queuelog_jobs_completed", "Jobs completed", ["type"], registry=REGISTRY)
FAILED = Counter(
    "queuelog_jobs_failed", "Jobs failed for good (no retry left)", ["type"], registry=REGISTRY
)
RETRIED = Counter(
    "queuelog_jobs_retried", "Failed attempts put back to run again", ["type"], registry=REGISTRY
)
LEASES_EXPIRED = Counter(
    "queuelog_leases_expired",
    "Leases that ran out and were taken back",
    ["type"],
    registry=REGISTRY,
)
WAIT_SECONDS = Histogram(
    "queuelog_job_wait_seconds",
    "From when a job was due to when a worker claimed it",
    ["type"],
    buckets=JOB_BUCKETS,
    registry=REGISTRY,
)
RUN_SECONDS = Histogram(
    "queuelog_job_run_seconds",
    "From a claim to the worker's complete or fail",
    ["type"],
    buckets=JOB_BUCKETS,
    registry=REGISTRY,
)
GRAPHQL_REQUESTS = Counter(
    "queuelog_graphql_requests",
    "GraphQL requests over HTTP by operation (its root field) and outcome",
    ["operation", "outcome"],
    registry=REGISTRY,
)
GRAPHQL_SECONDS = Histogram(
    "queuelog_graphql_request_seconds",
    "Time to answer a GraphQL request over HTTP, by operation (its root field)",
    ["operation"],
    buckets=REQUEST_BUCKETS,
    registry=REGISTRY,
)
SUBSCRIPTIONS = Gauge(
    "queuelog_subscriptions",
    "Subscriptions open",
    registry=REGISTRY,
    multiprocess_mode="livesum",
)


M = TypeVar("M", bound=MetricWrapperBase)


class Children(Generic[M]):
    """A labelled metric's children by label values, each looked up in the metric once: the
    label values (job types, root fields, outcomes) are few and fixed by the settings and
    the schema, and `labels()` takes a lock on every call."""

    def __init__(self, metric: M) -> None:
        self.metric = metric
        self.children: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self.children.get(values)
        if child is None:
            child = self.children[values] = self.metric.labels(*values)
        return child


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds())


class JobMetrics(JobObserver):
    """Counts what the job service reports after each commit."""

    def __init__(self) -> None:
        self.enqueued_by = Children(ENQUEUED)
        self.claimed_by = Children(CLAIMED)
        self.completed_by = Children(COMPLETED)
        self.failed_by = Children(FAILED)
        self.retried_by = Children(RETRIED)
        self.expired_by = Children(LEASES_EXPIRED)
        self.wait_by = Children(WAIT_SECONDS)
        self.run_by = Children(RUN_SECONDS)

    def enqueued(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            self.enqueued_by(job.type).inc()

    def claimed(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            self.claimed_by(job.type).inc()
            # Due at run_at, or when enqueued if that was later (run_at in the past).
            wait = _seconds(max(job.run_at, job.created_at), job.claimed_at)
            if wait is not None:
                self.wait_by(job.type).observe(wait)

    def finished(self, job: Job, started: datetime | None, retried: bool) -> None:
        if retried:
            self.retried_by(job.type).inc()
        elif job.status is Status.COMPLETED:
            self.completed_by(job.type).inc()
        else:
            self.failed_by(job.type).inc()
        run = _seconds(started, job.finished_at or job.updated_at)
        if run is not None:
            self.run_by(job.type).observe(run)

    def leases_expired(self, expired: Sequence[Expired]) -> None:
        for job_type, retried in expired:
            self.expired_by(job_type).inc()
            (self.retried_by if retried else self.failed_by)(job_type).inc()


_REQUESTS_BY = Children(GRAPHQL_REQUESTS)
_SECONDS_BY = Children(GRAPHQL_SECONDS)


def observe_request(operation: str, outcome: str, seconds: float) -> None:
    _REQUESTS_BY(operation, outcome).inc()
    _SECONDS_BY(operation).observe(seconds)


class Scraped(NamedTuple):
    """What a scrape reads from the database: jobs by type and status, and paused types."""

    counts: list[tuple[str, str, int]]
    paused: frozenset[str]
    feed_lag: float = 0.0


def read_scraped(tx: Tx, job_types: Sequence[str]) -> Scraped:
    states = types_sql.states(tx, job_types)
    paused = frozenset(name for name, state in states.items() if state.paused)
    return Scraped(counts_sql.by_type_and_status(tx), paused, events_sql.lag(tx))


class _JobGauges(Collector):
    """`queuelog_jobs{type,status}` from counts read just before: every configured type
    and status, zero where there are none, and any other type the table still holds; and
    `queuelog_job_type_paused{type}`, 1 for a paused type, for every configured type."""

    def __init__(self, scraped: Scraped, job_types: Sequence[str]) -> None:
        self.counts = scraped.counts
        self.paused = scraped.paused
        self.feed_lag = scraped.feed_lag
        self.job_types = job_types

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "queuelog_jobs", "Jobs by type and status (the database's)", labels=["type", "status"]
        )
        values = {(t, s.value): 0 for t in self.job_types for s in Status}
        for job_type, status, n in self.counts:
            values[job_type, status] = n
        for (job_type, status), n in sorted(values.items()):
            family.add_metric([job_type, status], n)
        yield family
        paused = GaugeMetricFamily(
            "queuelog_job_type_paused",
            "1 while claims skip the type (pauseJobType), else 0 (the database's)",
            labels=["type"],
        )
        for job_type in sorted(self.job_types):
            paused.add_metric([job_type], 1 if job_type in self.paused else 0)
        yield paused
        yield GaugeMetricFamily(
            "queuelog_event_feed_lag_seconds",
            "How long the change feed's readers may be held back: the age of the oldest"
            " transaction still appending events (the database's; 0 with one writer)",
            value=self.feed_lag,
        )


def render(scraped: Scraped, job_types: Sequence[str]) -> bytes:
    """The exposition: this process's metrics (or every process's, in multiprocess mode)
    and the job gauges."""
    if MULTIPROCESS_DIR:
        processes = CollectorRegistry()
        multiprocess.MultiProcessCollector(processes)  # type: ignore[no-untyped-call]
        own = generate_latest(processes)
    else:
        own = generate_latest(REGISTRY)
    jobs = CollectorRegistry()
    jobs.register(_JobGauges(scraped, job_types))
    return own + generate_latest(jobs)


class MetricsEndpoint:
    """GET /metrics: for an admin (or viewer) key, or for anyone when `metrics_public`."""

    def __init__(self, services: Services) -> None:
        self.services = services

    def refresh_subscriptions(self) -> None:
        SUBSCRIPTIONS.set(self.services.feed.followers)

    async def respond(self, request: Request) -> Response:
        user = request.scope.get("user")
        if not self.services.settings.metrics_public:
            if not isinstance(user, Principal):
                needed = f"the metrics need {who_may(Capability.READ_ALL)}"
                return _refused(401, ErrorCode.UNAUTHENTICATED, needed)
            if not may(user.actor.role, Capability.READ_ALL):
                return _refused(
                    403, ErrorCode.FORBIDDEN, refusal(user.actor.role, Capability.READ_ALL)
                )
        self.refresh_subscriptions()
        job_types = self.services.settings.job_types
        scraped = await self.services.db.read(read_scraped, job_types)
        body = await asyncio.to_thread(render, scraped, job_types)
        return Response(body, media_type=CONTENT_TYPE_LATEST)


def _refused(status: int, code: str, message: str) -> Response:
    headers = {"WWW-Authenticate": 'Bearer realm="queuelog"'} if status == 401 else None
    body = {"errors": [{"message": message, "extensions": {"code": code}}]}
    return JSONResponse(body, status, headers)


async def subscriptions_loop(endpoint: MetricsEndpoint, interval: float = 1.0) -> None:
    """Keep this process's subscriptions gauge current between scrapes (another process
    may be the one scraped, in multiprocess mode)."""
    while True:
        endpoint.refresh_subscriptions()
        await asyncio.sleep(interval)


def process_exited(pid: int) -> None:
    """Drop a stopped process's live gauges (multiprocess mode)."""
    if MULTIPROCESS_DIR:
        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
