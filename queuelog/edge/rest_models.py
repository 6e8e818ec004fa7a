"""The bodies of the REST routes (`queuelog.edge.rest`): what each accepts and answers, as
pydantic models that both parse the requests and render the OpenAPI document
(`queuelog.edge.openapi`). They describe shapes only; every rule on the values (types
allowed, priorities, sizes, bounds) is the service's, the same as over GraphQL.

Field names are the seed's (`retry_count`, `idempotency_key`, …); statuses and priorities
are lower-case labels."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from queuelog.domain.lifecycle import Status
from queuelog.service import models

PriorityLabel = Literal["low", "medium", "high", "critical"]
StatusLabel = Literal["pending", "running", "completed", "failed", "cancelled"]
PRIORITIES: dict[str, models.Priority] = {p.name.lower(): p for p in models.Priority}
STATUSES: dict[str, Status] = {s.value: s for s in Status}
assert set(PRIORITIES) == set(get_args(PriorityLabel)), "one label per priority"
assert set(STATUSES) == set(get_args(StatusLabel)), "one label per status"

ANY_JSON = "any JSON value"


class Strict(BaseModel):
    """A request body: unknown fields refused (a `worker_id` cannot be slipped in), no
    coercion between JSON types."""

    model_config = ConfigDict(extra="forbid", strict=True)


class EnqueueBody(Strict):
    type: str = Field(description="A configured job type this key may use.")
    payload: Any = Field(
        default=None, description="A JSON object, at most 64 KiB serialized; null: {}."
    )
    priority: PriorityLabel = Field(default="low", description="At most the key's max priority.")
    max_retries: int = 3
    idempotency_key: str | None = Field(
        default=None, description="The same key and request again answer 200 with the same job."
    )
    run_at: AwareDatetime | None = Field(
        default=None, description="Not claimable before this time."
    )
    delay_seconds: int | None = Field(default=None, description="Not claimable for this long.")
    concurrency_key: str | None = None


class ClaimBody(Strict):
    types: list[str] | None = Field(
        default=None, description="Omitted: every type the key may use."
    )
    lease_seconds: int | None = Field(default=None, description="Omitted: the type's lease.")
    wait_seconds: int | None = Field(
        default=None, description="Wait up to this long (0 to 60) for a job when none is claimable."
    )


class CompleteBody(Strict):
    result: Any = Field(default=None, description="Any JSON value, at most 64 KiB serialized.")


class FailBody(Strict):
    error: str = Field(description="Stored sanitized; shown to admins and viewers only.")
    retryable: bool = Field(default=True, description="false: FAILED now, whatever retries remain.")


class JobsQuery(BaseModel):
    """`GET /jobs`: the query string (its values are text, so numbers are read from it)."""

    model_config = ConfigDict(extra="forbid")

    status: StatusLabel | None = None
    type: str | None = None
    limit: int = Field(default=50, description="1 to 100 jobs a page.")
    after: str | None = Field(default=None, description="`next_cursor` of the previous page.")


class JobOut(BaseModel):
    """A job as the caller may see it: `error` only for admins and viewers,
    `idempotency_key` only for its producer, admins and viewers (null otherwise)."""

    id: int
    type: str
    payload: Any = Field(description=ANY_JSON)
    priority: PriorityLabel
    status: StatusLabel
    retry_count: int
    max_retries: int
    idempotency_key: str | None
    claimed_at: datetime | None
    worker_id: str | None
    error: str | None
    created_at: datetime
    updated_at: datetime
    result: Any = Field(description=ANY_JSON)
    run_at: datetime

    @classmethod
    def of(cls, job: models.Job) -> JobOut:
        """The job as the service handed it out (`service.visibility` left out what the
        caller may not see)."""
        return cls.model_construct(
            id=job.id,
            type=job.type,
            payload=job.payload,
            priority=job.priority.name.lower(),
            status=job.status.value,
            retry_count=job.retry_count,
            max_retries=job.max_retries,
            idempotency_key=job.idempotency_key,
            claimed_at=job.claimed_at,
            worker_id=job.worker_id,
            error=job.error,
            created_at=job.created_at,
            updated_at=job.updated_at,
            result=job.result,
            run_at=job.run_at,
        )


class JobPage(BaseModel):
    jobs: list[JobOut] = Field(description="Newest first.")
    has_next: bool
    next_cursor: str | None = Field(description="`after` for the next page; null on the last.")


class ErrorOut(BaseModel):
    """Every error of the REST routes: `code` is the one GraphQL gives the same refusal."""

    code: str
    message: str
    field: list[str] | None = Field(default=None, description="The input at fault, when one is.")
    retry_after: float | None = Field(default=None, description="RATE_LIMITED: seconds to wait.")
    request_id: str | None = Field(default=None, description="INTERNAL_SERVER_ERROR: for the logs.")
    job: JobOut | None = Field(default=None, description="The job as it now is, when that helps.")
