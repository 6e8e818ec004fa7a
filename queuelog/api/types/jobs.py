"""Strawberry object types, enums and payloads of the contract."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import TYPE_CHECKING

import strawberry
from strawberry.scalars import JSON

from queuelog.domain import codes
from queuelog.domain.codes import USER_ERROR_DESCRIPTIONS
from queuelog.service import models, reports
from queuelog.service.errors import DomainError
from queuelog.service.models import schedule_of

# The domain's enums are the GraphQL enums (registered here, used by their domain names).
JobStatus = models.Status
JobPriority = models.Priority
Role = models.Role
strawberry.enum(JobStatus, name="JobStatus")
strawberry.enum(
    JobPriority,
    name="JobPriority",
    description="Stored as 0, 10, 20, 30 so that ORDER BY priority DESC sorts directly.",
)
strawberry.enum(Role, name="Role")


# The contract's enum, made from the catalogue with its descriptions (for type checkers, the
# catalogue's own enum: the members and values are the same).
if TYPE_CHECKING:
    UserErrorCode = codes.UserErrorCode
else:
    UserErrorCode = strawberry.enum(
        enum.Enum(
            "UserErrorCode",
            [
                (
                    code.name,
                    strawberry.enum_value(code.value, description=USER_ERROR_DESCRIPTIONS[code])
                    if code in USER_ERROR_DESCRIPTIONS
                    else code.value,
                )
                for code in codes.UserErrorCode
            ],
        ),
        name="UserErrorCode",
    )


@strawberry.type(description="An expected failure of a mutation.")
class UserError:
    code: UserErrorCode
    message: str
    field: list[str] | None = None

    @classmethod
    def of(cls, exc: DomainError) -> UserError:
        return cls(code=UserErrorCode(exc.code), message=exc.message, field=exc.field)


@strawberry.type
class Job:
    id: strawberry.ID
    type: str
    payload: JSON
    priority: JobPriority
    status: JobStatus
    retry_count: int
    max_retries: int
    idempotency_key: str | None
    producer: str
    run_at: datetime
    claimed_at: datetime | None
    worker_id: str | None
    lease_expires_at: datetime | None
    error: str | None
    result: JSON | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    progress: JSON | None = strawberry.field(
        description="What the holding worker last reported through heartbeatJob(progress:); "
        "kept after the job ends."
    )
    schedule: str | None = strawberry.field(
        description="The schedule that enqueued this job, if any."
    )
    concurrency_key: str | None = strawberry.field(
        description="Jobs of one type that share a concurrency key obey the type's "
        "maxRunningPerKey."
    )

    # Resolved by `queuelog.api.resolvers.fields.job_events` (wired in the schema assembly).
    events: list[JobEvent] = strawberry.field(default_factory=list)

    @classmethod
    def of(cls, job: models.Job) -> Job:
        """The job as the service handed it out (fields the viewer may not see are left
        out by the service: `service.visibility`)."""
        return cls(
            id=strawberry.ID(str(job.id)),
            type=job.type,
            payload=job.payload,
            priority=job.priority,
            status=job.status,
            retry_count=job.retry_count,
            max_retries=job.max_retries,
            idempotency_key=job.idempotency_key,
            producer=job.producer,
            run_at=job.run_at,
            claimed_at=job.claimed_at,
            worker_id=job.worker_id,
            lease_expires_at=job.lease_expires_at,
            error=job.error,
            result=job.result,
            created_at=job.created_at,
            updated_at=job.updated_at,
            finished_at=job.finished_at,
            progress=job.progress,
            schedule=schedule_of(job.producer),
            concurrency_key=job.concurrency_key,
        )


@strawberry.type(description="The latest progress of a running job, as its worker reported it.")
class JobProgress:
    job: Job
    progress: JSON | None
    reported_at: datetime

    @classmethod
    def of(cls, job: models.Job) -> JobProgress:
        assert job.progress_at is not None
        return cls(job=Job.of(job), progress=job.progress, reported_at=job.progress_at)


def event_cursor(event_id: int) -> str:
    """Opaque to clients, yet strictly increasing both as text and as a number."""
    return f"{event_id:016d}"


@strawberry.type(description="One status change of one job. Events are totally ordered by cursor.")
class JobEvent:
    cursor: str
    previous_status: JobStatus | None
    status: JobStatus
    occurred_at: datetime
    job_id: strawberry.Private[int]
    event_id: strawberry.Private[int]

    # Resolved by `queuelog.api.resolvers.fields.event_job` (wired in the schema assembly).
    job: Job = strawberry.field(default=None)

    @classmethod
    def of(cls, e: models.JobEvent) -> JobEvent:
        return cls(
            cursor=event_cursor(e.id),
            previous_status=e.previous_status,
            status=e.status,
            occurred_at=e.occurred_at,
            job_id=e.job_id,
            event_id=e.id,
        )


@strawberry.type
class PageInfo:
    has_next_page: bool
    end_cursor: str | None


@strawberry.type
class JobEdge:
    cursor: str
    node: Job


@strawberry.type
class JobConnection:
    edges: list[JobEdge]
    nodes: list[Job]
    page_info: PageInfo
    # None when the operation does not select it (it is then never shown).
    total_count: int | None = strawberry.field(graphql_type=int)


@strawberry.type
class QueueStats:
    pending: int
    running: int
    completed: int
    failed: int
    cancelled: int


@strawberry.type
class Viewer:
    name: str
    role: Role
    allowed_types: list[str] | None
    max_priority: JobPriority


@strawberry.type
class ApiKey:
    name: str
    role: Role
    allowed_types: list[str] | None
    max_priority: JobPriority
    created_at: datetime
    revoked_at: datetime | None

    @classmethod
    def of(cls, key: models.ApiKey) -> ApiKey:
        return cls(
            name=key.name,
            role=key.role,
            allowed_types=None if key.allowed_types is None else list(key.allowed_types),
            max_priority=key.max_priority,
            created_at=key.created_at,
            revoked_at=key.revoked_at,
        )


@strawberry.input
class EnqueueJobInput:
    type: str
    payload: JSON | None = strawberry.field(
        default=strawberry.UNSET,
        description="A JSON object; at most 64 KiB once serialized. Omitted or null: {}.",
    )
    priority: JobPriority | None = models.Priority.LOW
    max_retries: int | None = 3
    idempotency_key: str | None = strawberry.UNSET
    run_at: datetime | None = strawberry.UNSET
    delay_seconds: int | None = strawberry.UNSET
    concurrency_key: str | None = strawberry.field(
        default=strawberry.UNSET,
        description="1 to 255 printable characters; see JobTypeLimits.maxRunningPerKey.",
    )

    def request(self) -> models.EnqueueRequest:
        unset = strawberry.UNSET
        key, run_at, delay = self.idempotency_key, self.run_at, self.delay_seconds
        concurrency = self.concurrency_key
        return models.EnqueueRequest(
            self.type,
            {} if self.payload is unset or self.payload is None else self.payload,
            models.Priority.LOW if self.priority is None else self.priority,
            3 if self.max_retries is None else self.max_retries,
            None if key is unset else key,
            None if run_at is unset else run_at,
            None if delay is unset else delay,
            None if concurrency is unset else concurrency,
        )


@strawberry.input
class CreateApiKeyInput:
    name: str
    role: Role
    allowed_types: list[str] | None = strawberry.UNSET
    max_priority: JobPriority | None = models.Priority.MEDIUM


@strawberry.type
class EnqueueJobPayload:
    job: Job | None = None
    created: bool = False
    user_errors: list[UserError] = strawberry.field(default_factory=list)


@strawberry.type
class EnqueueJobsPayload:
    jobs: list[Job] = strawberry.field(default_factory=list)
    user_errors: list[UserError] = strawberry.field(default_factory=list)


@strawberry.type
class ClaimJobPayload:
    job: Job | None = None
    user_errors: list[UserError] = strawberry.field(default_factory=list)


@strawberry.type
class ClaimJobsPayload:
    jobs: list[Job] = strawberry.field(default_factory=list)
    user_errors: list[UserError] = strawberry.field(default_factory=list)


@strawberry.type
class JobPayload:
    job: Job | None = None
    user_errors: list[UserError] = strawberry.field(default_factory=list)


@strawberry.type
class FailJobPayload:
    job: Job | None = None
    will_retry: bool = False
    user_errors: list[UserError] = strawberry.field(default_factory=list)


@strawberry.input(
    description=(
        "One outcome of a job the caller holds: without `error` it completes the job with"
        " `result`; with `error` it fails it, as failJob does."
    )
)
class JobOutcomeInput:
    id: strawberry.ID
    result: JSON | None = strawberry.UNSET
    error: str | None = strawberry.UNSET
    retryable: bool | None = True

    def outcome(self, job_id: int | None) -> reports.Outcome:
        unset = strawberry.UNSET
        return reports.Outcome(
            job_id,
            None if self.result is unset else self.result,
            None if self.error is unset else self.error,
            self.retryable is not False,
        )


@strawberry.type(description="What one reported outcome did.")
class JobOutcome:
    job: Job | None = strawberry.field(
        default=None,
        description=(
            "The job as the outcome left it; null when the outcome was refused with NOT_FOUND."
        ),
    )
    will_retry: bool = strawberry.field(
        default=False,
        description="For a failure: true when the job went back to PENDING for another attempt.",
    )
    user_errors: list[UserError] = strawberry.field(default_factory=list)


@strawberry.type
class ReportJobsPayload:
    outcomes: list[JobOutcome] = strawberry.field(
        default_factory=list, description="One per outcome given, in the same order."
    )


@strawberry.type
class CreateApiKeyPayload:
    api_key: ApiKey | None = None
    secret: str | None = None
    user_errors: list[UserError] = strawberry.field(default_factory=list)


# -- schedules (`service.schedules`) ----------------------------------------------------
