"""The domain: priorities, roles, the acting principal, and jobs as the service hands them
out. Statuses and their transitions are `queuelog.domain.lifecycle`'s."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from queuelog.domain.lifecycle import Status
from queuelog.domain.roles import MAY, Capability, Role

__all__ = ["Actor", "ApiKey", "EnqueueRequest", "Job", "JobEvent", "Page", "Priority", "Role"]
__all__ += ["Status"]


class Priority(enum.IntEnum):
    LOW = 0
    MEDIUM = 10
    HIGH = 20
    CRITICAL = 30


# Lookups by value: a dict lookup, cheaper than calling the enum class.
_STATUSES = {s.value: s for s in Status}
_PRIORITIES = {p.value: p for p in Priority}


# The roles that may read everything (metrics, schedules): `domain.roles` says which.
READERS = frozenset(MAY[Capability.READ_ALL])


@dataclass(frozen=True, slots=True)
class Actor:
    """Who is calling: an API key's name, role and limits."""

    name: str
    role: Role
    allowed_types: tuple[str, ...] | None = None
    max_priority: Priority = Priority.MEDIUM

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN

    def may_use_type(self, job_type: str) -> bool:
        return self.is_admin or self.allowed_types is None or job_type in self.allowed_types


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs far more
class Job:
    """A job as the service hands it out (`service.visibility.shown` leaves out what the
    caller may not see)."""

    id: int
    type: str
    payload: Any
    priority: Priority
    status: Status
    retry_count: int
    max_retries: int
    idempotency_key: str | None
    producer: str
    run_at: datetime
    claimed_at: datetime | None
    worker_id: str | None
    lease_expires_at: datetime | None
    error: str | None
    result: Any
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    progress: Any = None
    progress_at: datetime | None = None
    concurrency_key: str | None = None

    @classmethod
    def from_row(cls, row: Any) -> Job:
        return cls(
            id=row.id,
            type=row.type,
            payload=orjson.loads(row.payload),
            priority=_PRIORITIES[row.priority],
            status=_STATUSES[row.status],
            retry_count=row.retry_count,
            max_retries=row.max_retries,
            idempotency_key=row.idempotency_key,
            producer=row.producer,
            run_at=row.run_at,
            claimed_at=row.claimed_at,
            worker_id=row.worker_id,
            lease_expires_at=row.lease_expires_at,
            error=row.error,
            result=None if row.result is None else orjson.loads(row.result),
            created_at=row.created_at,
            updated_at=row.updated_at,
            finished_at=row.finished_at,
            progress=None if row.progress is None else orjson.loads(row.progress),
            progress_at=row.progress_at,
            concurrency_key=row.concurrency_key,
        )


@dataclass(frozen=True, slots=True)
class JobEvent:
    id: int
    job_id: int
    job_type: str
    producer: str
    worker_id: str | None
    previous_status: Status | None
    status: Status
    occurred_at: datetime

    @classmethod
    def from_row(cls, row: Any) -> JobEvent:
        return cls(
            id=row.id,
            job_id=row.job_id,
            job_type=row.job_type,
            producer=row.producer,
            worker_id=row.worker_id,
            previous_status=None if row.previous_status is None else _STATUSES[row.previous_status],
            status=_STATUSES[row.status],
            occurred_at=row.occurred_at,
        )


@dataclass(slots=True)  # not frozen, as Job: a batch builds hundreds per request
class EnqueueRequest:
    type: str
    payload: Any = None
    priority: Priority = Priority.LOW
    max_retries: int = 3
    idempotency_key: str | None = None
    run_at: datetime | None = None
    delay_seconds: int | None = None
    concurrency_key: str | None = None


@dataclass(frozen=True, slots=True)
class Page:
    jobs: list[Job]
    has_next: bool
    total: int | None  # None when not asked for


@dataclass(frozen=True, slots=True)
class ApiKey:
    name: str
    role: Role
    allowed_types: tuple[str, ...] | None
    max_priority: Priority
    created_at: datetime
    revoked_at: datetime | None

    @classmethod
    def from_row(cls, row: Any) -> ApiKey:
        return cls(
            name=row.name,
            role=Role(row.role),
            allowed_types=None
            if row.allowed_types is None
            else tuple(orjson.loads(row.allowed_types)),
            max_priority=Priority(row.max_priority),
            created_at=row.created_at,
            revoked_at=row.revoked_at,
        )

    def actor(self) -> Actor:
        return Actor(self.name, self.role, self.allowed_types, self.max_priority)


PRODUCER_PREFIX = "schedule:"
NAME_MAX = 100


def producer_of(schedule: str) -> str:
    return PRODUCER_PREFIX + schedule


def schedule_of(producer: str) -> str | None:
    """The schedule that enqueued a job of `producer`, if a schedule did."""
    return producer[len(PRODUCER_PREFIX) :] if producer.startswith(PRODUCER_PREFIX) else None
