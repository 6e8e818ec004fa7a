"""What the client returns: typed results, and the errors it raises."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from queuelog.domain.codes import ClientCode


class JobStatus(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        return self in (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED)


class Priority(StrEnum):
    LOW = "LOW"
    MEDIUM = "MEDIUM"
    HIGH = "HIGH"
    CRITICAL = "CRITICAL"


def _time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    type: str
    payload: dict[str, Any]
    priority: Priority
    status: JobStatus
    retry_count: int
    max_retries: int
    producer: str
    run_at: datetime
    created_at: datetime
    updated_at: datetime
    idempotency_key: str | None = None
    claimed_at: datetime | None = None
    worker_id: str | None = None
    lease_expires_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None
    result: Any = None
    progress: Any = None

    @classmethod
    def of(cls, data: dict[str, Any]) -> Job:
        return cls(
            id=data["id"],
            type=data["type"],
            payload=data["payload"],
            priority=Priority(data["priority"]),
            status=JobStatus(data["status"]),
            retry_count=data["retryCount"],
            max_retries=data["maxRetries"],
            producer=data["producer"],
            run_at=datetime.fromisoformat(data["runAt"]),
            created_at=datetime.fromisoformat(data["createdAt"]),
            updated_at=datetime.fromisoformat(data["updatedAt"]),
            idempotency_key=data.get("idempotencyKey"),
            claimed_at=_time(data.get("claimedAt")),
            worker_id=data.get("workerId"),
            lease_expires_at=_time(data.get("leaseExpiresAt")),
            finished_at=_time(data.get("finishedAt")),
            error=data.get("error"),
            result=data.get("result"),
            progress=data.get("progress"),
        )

    @property
    def lease_seconds(self) -> float | None:
        """The lease the server granted at the last claim or heartbeat, by its own clock."""
        if self.lease_expires_at is None:
            return None
        return (self.lease_expires_at - self.updated_at).total_seconds()


@dataclass(frozen=True, slots=True)
class JobEvent:
    """One status change. Keep `cursor` to resume `watch(after=...)` with no gap."""

    cursor: str
    job: Job
    previous_status: JobStatus | None
    status: JobStatus
    occurred_at: datetime

    @classmethod
    def of(cls, data: dict[str, Any]) -> JobEvent:
        previous = data.get("previousStatus")
        return cls(
            cursor=data["cursor"],
            job=Job.of(data["job"]),
            previous_status=None if previous is None else JobStatus(previous),
            status=JobStatus(data["status"]),
            occurred_at=datetime.fromisoformat(data["occurredAt"]),
        )


@dataclass(frozen=True, slots=True)
class JobProgress:
    job: Job
    progress: Any
    reported_at: datetime

    @classmethod
    def of(cls, data: dict[str, Any]) -> JobProgress:
        return cls(
            job=Job.of(data["job"]),
            progress=data.get("progress"),
            reported_at=datetime.fromisoformat(data["reportedAt"]),
        )


@dataclass(frozen=True, slots=True)
class JobPage:
    jobs: list[Job]
    has_next_page: bool
    end_cursor: str | None
    """Pass as `after` for the next page."""


@dataclass(frozen=True, slots=True)
class Failed:
    """What failJob answered: the job, and whether it went back to PENDING."""

    job: Job
    will_retry: bool


@dataclass(frozen=True, slots=True)
class Reported:
    """The brief answer to one reported outcome (`AsyncClient.report`): the job's id and
    status as the outcome left it, whether a failed job goes back to PENDING, and the
    server's refusal of the outcome when it refused it (`status` is then the job's as it
    is, if the job exists)."""

    job_id: str
    status: JobStatus | None
    will_retry: bool = False
    refused: UserError | None = None


@dataclass(frozen=True, slots=True)
class Settlement:
    """One job's outcome, for `settle`: completed with `result`, or failed with `error`
    (`retryable`: back to PENDING while retries remain)."""

    job_id: str
    completed: bool
    result: Any = None
    error: str = ""
    retryable: bool = True


class QueuelogError(Exception):
    """The server refused an operation; `code` is its error code (e.g. NOT_FOUND, FORBIDDEN)."""

    def __init__(
        self, code: str, message: str, field: list[str] | None = None, job: Job | None = None
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.field = field
        self.job = job
        """The job as it is now, when the server answered with one (e.g. INVALID_STATE)."""


class UserError(QueuelogError):
    """An expected refusal of a mutation (the payload's userErrors)."""


class ConnectionFailed(QueuelogError):
    """The server could not be reached, or answered with a server error; safe to retry."""

    def __init__(self, message: str) -> None:
        super().__init__(ClientCode.CONNECTION_FAILED, message)


class BadResponse(ConnectionFailed):
    """The server answered, but not with the GraphQL response asked for (not JSON, or
    fields missing or of the wrong kind): a fault of the server, as an HTTP 5xx is, and
    as safe to retry."""

    def __init__(self, message: str) -> None:
        QueuelogError.__init__(self, ClientCode.BAD_RESPONSE, message)
