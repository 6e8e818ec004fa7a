"""GraphQL types of the operators' API: schedules, job filters, throughput, bulk changes and
job types."""

from __future__ import annotations

from datetime import datetime

import strawberry
from strawberry.scalars import JSON

from queuelog.api.types.jobs import Job, JobPriority, JobStatus, QueueStats, UserError
from queuelog.service import filters, models
from queuelog.service import job_types as service_job_types
from queuelog.service import schedules as service_schedules
from queuelog.service.throughput import Bucket


@strawberry.type(
    description="A recurring job: each due time enqueues one job, once across every replica."
)
class Schedule:
    name: str
    type: str
    payload: JSON
    priority: JobPriority
    cron: str = strawberry.field(
        description="A 5-field cron expression (minute hour day-of-month month day-of-week), "
        "or @every <n>s|m|h."
    )
    timezone: str = strawberry.field(description="IANA time zone the cron expression is read in.")
    paused: bool
    next_run_at: datetime | None
    last_run_at: datetime | None
    last_job_id: strawberry.Private[int | None]
    # Resolved by `queuelog.api.resolvers.schedules.last_job` (wired in the schema assembly).
    last_job: Job | None = strawberry.field(
        default=None, description="The job enqueued at lastRunAt, if the viewer may see it."
    )

    @classmethod
    def of(cls, s: service_schedules.Schedule) -> Schedule:
        return cls(
            name=s.name,
            type=s.type,
            payload=s.payload,
            priority=s.priority,
            cron=s.cron,
            timezone=s.timezone,
            paused=s.paused,
            next_run_at=s.next_run_at,
            last_run_at=s.last_run_at,
            last_job_id=s.last_job_id,
        )


@strawberry.input
class ScheduleInput:
    name: str = strawberry.field(
        description="1 to 100 printable characters; an existing schedule of that name is replaced."
    )
    type: str
    payload: JSON | None = strawberry.field(
        default=None, description="A JSON object; omitted or null: {}."
    )
    priority: JobPriority | None = models.Priority.LOW
    cron: str
    timezone: str | None = "UTC"
    paused: bool | None = False

    def request(self) -> service_schedules.ScheduleRequest:
        return service_schedules.ScheduleRequest(
            name=self.name,
            type=self.type,
            cron=self.cron,
            payload=self.payload,
            priority=models.Priority.LOW if self.priority is None else self.priority,
            timezone="UTC" if self.timezone is None else self.timezone,
            paused=bool(self.paused),
        )


@strawberry.type
class SchedulePayload:
    schedule: Schedule | None = None
    user_errors: list[UserError] = strawberry.field(default_factory=list)


@strawberry.input(
    description="Every condition given must hold. Each list matches any of its values."
)
class JobFilter:
    ids: list[strawberry.ID] | None = None
    statuses: list[JobStatus] | None = None
    types: list[str] | None = None
    producer: str | None = strawberry.field(
        default=None,
        description=(
            "Name of the producer key (admins and viewers; a producer always sees only its own)."
        ),
    )
    worker_id: str | None = None
    idempotency_key: str | None = None
    concurrency_key: str | None = None
    schedule: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    payload_contains: JSON | None = strawberry.field(
        default=None,
        description=(
            "Jobs whose payload contains this JSON object, as PostgreSQL's jsonb @> reads it"
            " (nested objects match by containment). At most 4 KiB, 8 levels deep, 64 items"
            " in an array and 256 values in all."
        ),
    )

    def given(self) -> filters.FilterInput:
        return filters.FilterInput(
            ids=self.ids,
            statuses=self.statuses,
            types=self.types,
            producer=self.producer,
            worker_id=self.worker_id,
            idempotency_key=self.idempotency_key,
            concurrency_key=self.concurrency_key,
            schedule=self.schedule,
            created_after=self.created_after,
            created_before=self.created_before,
            payload_contains=self.payload_contains,
        )


@strawberry.type(
    description=(
        "Counts of what happened to the viewer's jobs in one time bucket, from the job history."
    )
)
class ThroughputBucket:
    start: datetime
    enqueued: int
    started: int
    completed: int
    failed: int
    retried: int = strawberry.field(
        description="Attempts that failed and went back to PENDING (including expired leases)."
    )

    @classmethod
    def of(cls, b: Bucket) -> ThroughputBucket:
        return cls(
            start=b.start,
            enqueued=b.enqueued,
            started=b.started,
            completed=b.completed,
            failed=b.failed,
            retried=b.retried,
        )


@strawberry.type(description="What a bulk mutation changed.")
class BulkJobsPayload:
    count: int = strawberry.field(description="How many jobs changed status.")
    has_more: bool = strawberry.field(
        description="True when more jobs matched than `limit` allowed: call again to go on."
    )
    user_errors: list[UserError] = strawberry.field(default_factory=list)


@strawberry.type(
    description="Flow control of one job type, enforced across every replica sharing the "
    "database. Null: no limit."
)
class JobTypeLimits:
    max_running: int | None = strawberry.field(
        description="At most this many jobs of the type RUNNING at once."
    )
    max_running_per_key: int | None = strawberry.field(
        description="At most this many jobs of the type with one concurrencyKey RUNNING at once."
    )
    max_starts_per_second: float | None = strawberry.field(
        description="At most this many claims of the type per second (a token bucket, "
        "burst = max(1, rate))."
    )


@strawberry.type(description="One configured job type as the viewer may see it.")
class JobType:
    name: str
    stats: QueueStats = strawberry.field(
        description="Counts over the jobs of this type that the viewer may see."
    )
    paused: bool = strawberry.field(
        description="Claims skip a paused type; enqueueing still works."
    )
    limits: JobTypeLimits
    oldest_pending_at: datetime | None = strawberry.field(
        description=(
            "The runAt of the oldest PENDING job of this type that the viewer may see and"
            " that is due (runAt not in the future); null when none."
        )
    )

    @classmethod
    def of(cls, t: service_job_types.JobTypeView) -> JobType:
        return cls(
            name=t.name,
            stats=QueueStats(**t.stats),
            paused=t.paused,
            limits=JobTypeLimits(
                max_running=t.limits.max_running,
                max_running_per_key=t.limits.max_running_per_key,
                max_starts_per_second=t.limits.max_starts_per_second,
            ),
            oldest_pending_at=t.oldest_pending_at,
        )


@strawberry.input
class JobTypeLimitsInput:
    max_running: int | None = strawberry.field(
        default=None, description="Null or omitted: no limit. 1 or more."
    )
    max_running_per_key: int | None = None
    max_starts_per_second: float | None = strawberry.field(
        default=None, description="Greater than 0."
    )

    def limits(self) -> service_job_types.Limits:
        return service_job_types.Limits(
            self.max_running, self.max_running_per_key, self.max_starts_per_second
        )


@strawberry.type
class JobTypePayload:
    job_type: JobType | None = None
    user_errors: list[UserError] = strawberry.field(default_factory=list)
