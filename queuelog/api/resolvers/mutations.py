"""Mutation resolvers: expected failures become `userErrors`, never top-level errors."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import strawberry
from starlette.requests import Request
from strawberry.scalars import JSON

from queuelog.api.resolvers.context import Context, refusing_bad_input
from queuelog.api.resolvers.queries import parse_id
from queuelog.api.types.jobs import (
    ApiKey,
    ClaimJobPayload,
    ClaimJobsPayload,
    CreateApiKeyInput,
    CreateApiKeyPayload,
    EnqueueJobInput,
    EnqueueJobPayload,
    EnqueueJobsPayload,
    FailJobPayload,
    Job,
    JobOutcome,
    JobOutcomeInput,
    JobPayload,
    ReportJobsPayload,
    UserError,
)
from queuelog.api.types.queues import (
    BulkJobsPayload,
    JobFilter,
)
from queuelog.auth.backend import bearer
from queuelog.auth.permissions import unauthenticated
from queuelog.events.claims import ClaimArgs, claim_for
from queuelog.events.sessions import KeyRevoked
from queuelog.service import filters, models
from queuelog.service.errors import DomainError, NotFound
from queuelog.service.models import Priority

Info = strawberry.Info[Context, None]


def _job_id(id: strawberry.ID) -> int:
    job_id = parse_id(id)
    if job_id is None:
        raise NotFound(f"no job {id}", ["id"])
    return job_id


async def enqueue_job(info: Info, input: EnqueueJobInput) -> EnqueueJobPayload:
    ctx, actor = info.context, info.context.require_actor()
    try:
        job, created = await ctx.service.enqueue(actor, input.request())
    except DomainError as exc:
        return EnqueueJobPayload(user_errors=[UserError.of(exc)])
    return EnqueueJobPayload(job=Job.of(job), created=created)


async def enqueue_jobs(info: Info, inputs: list[EnqueueJobInput]) -> EnqueueJobsPayload:
    ctx, actor = info.context, info.context.require_actor()
    try:
        jobs = await ctx.service.enqueue_many(actor, [i.request() for i in inputs])
    except DomainError as exc:
        return EnqueueJobsPayload(user_errors=[UserError.of(exc)])
    return EnqueueJobsPayload(jobs=[Job.of(j) for j in jobs])


async def _claim(
    info: Info, types: list[str] | None, lease_seconds: int | None, limit: int, wait: int | None
) -> list[models.Job]:
    ctx, actor = info.context, info.context.require_actor()
    request = ctx.request

    async def gone() -> None:
        """Ends when the HTTP client disconnects (the request's body was read already)."""
        while (await request.receive())["type"] != "http.disconnect":
            pass

    try:
        return await claim_for(
            ctx.service,
            ctx.feed,
            ctx.job_types,
            actor,
            ClaimArgs(types, lease_seconds, limit, wait),
            gone if isinstance(request, Request) else None,
            _key_live(ctx),
        )
    except KeyRevoked as exc:
        raise unauthenticated(str(exc)) from None


def _key_live(ctx: Context) -> Callable[[], Awaitable[bool]]:
    """Whether the request's key is live now, as a new request with it would find."""
    session, keys = ctx.session, ctx.keys
    if session is not None:  # a WebSocket connection's

        async def confirmed() -> bool:
            try:
                await session.confirm()
            except KeyRevoked:
                return False
            return True

        return confirmed
    token = bearer(ctx.request.headers.get("authorization")) or ""

    async def verified() -> bool:
        return await keys.verify(token) is not None

    return verified


async def claim_job(
    info: Info,
    types: list[str] | None = None,
    lease_seconds: int | None = None,
    wait_seconds: int | None = 0,
) -> ClaimJobPayload:
    try:
        jobs = await _claim(info, types, lease_seconds, 1, wait_seconds)
    except DomainError as exc:
        return ClaimJobPayload(user_errors=[UserError.of(exc)])
    return ClaimJobPayload(job=Job.of(jobs[0]) if jobs else None)


async def claim_jobs(
    info: Info,
    limit: int,
    types: list[str] | None = None,
    lease_seconds: int | None = None,
    wait_seconds: int | None = 0,
) -> ClaimJobsPayload:
    try:
        jobs = await _claim(info, types, lease_seconds, limit, wait_seconds)
    except DomainError as exc:
        return ClaimJobsPayload(user_errors=[UserError.of(exc)])
    return ClaimJobsPayload(jobs=[Job.of(j) for j in jobs])


def _refused(exc: DomainError, info: Info) -> JobPayload:
    job = None if exc.job is None else Job.of(exc.job)
    return JobPayload(job=job, user_errors=[UserError.of(exc)])


async def _job_change(
    info: Info, id: strawberry.ID, change: Callable[[models.Actor, int], Awaitable[models.Job]]
) -> JobPayload:
    """The job `id` names as `change` leaves it, or why it was refused."""
    actor = info.context.require_actor()
    try:
        job = await change(actor, _job_id(id))
    except DomainError as exc:
        return _refused(exc, info)
    return JobPayload(job=Job.of(job))


async def heartbeat_job(
    info: Info, id: strawberry.ID, lease_seconds: int | None = None, progress: JSON | None = None
) -> JobPayload:
    service = info.context.service
    return await _job_change(
        info, id, lambda actor, job_id: service.heartbeat(actor, job_id, lease_seconds, progress)
    )


async def complete_job(info: Info, id: strawberry.ID, result: JSON | None = None) -> JobPayload:
    service = info.context.service
    return await _job_change(
        info, id, lambda actor, job_id: service.complete(actor, job_id, result)
    )


async def fail_job(
    info: Info, id: strawberry.ID, error: str, retryable: bool | None = True
) -> FailJobPayload:
    ctx, actor = info.context, info.context.require_actor()
    try:
        job, will_retry = await ctx.service.fail(actor, _job_id(id), error, retryable is not False)
    except DomainError as exc:
        refused = _refused(exc, info)
        return FailJobPayload(job=refused.job, user_errors=refused.user_errors)
    return FailJobPayload(job=Job.of(job), will_retry=will_retry)


async def report_jobs(info: Info, outcomes: list[JobOutcomeInput]) -> ReportJobsPayload:
    """Each outcome's answer, as completeJob or failJob would give it; a count of outcomes
    out of bounds is BAD_USER_INPUT (the payload has no userErrors of its own)."""
    ctx, actor = info.context, info.context.require_actor()
    asked = [o.outcome(parse_id(o.id)) for o in outcomes]
    with refusing_bad_input():
        done = await ctx.service.report(actor, asked)
    return ReportJobsPayload(
        outcomes=[
            JobOutcome(
                job=None if r.job is None else Job.of(r.job),
                will_retry=r.will_retry,
                user_errors=[] if r.refused is None else [UserError.of(r.refused)],
            )
            for r in done
        ]
    )


async def cancel_job(info: Info, id: strawberry.ID) -> JobPayload:
    return await _job_change(info, id, info.context.service.cancel)


async def retry_job(info: Info, id: strawberry.ID) -> JobPayload:
    return await _job_change(info, id, info.context.service.retry)


async def cancel_jobs(info: Info, filter: JobFilter, limit: int | None = 1000) -> BulkJobsPayload:
    return await _bulk(info.context.service.cancel_many, info, filter, limit)


async def retry_jobs(info: Info, filter: JobFilter, limit: int | None = 1000) -> BulkJobsPayload:
    return await _bulk(info.context.service.retry_many, info, filter, limit)


async def _bulk(
    act: Callable[[models.Actor, filters.JobFilter, int], Awaitable[tuple[int, bool]]],
    info: Info,
    filter: JobFilter,
    limit: int | None,
) -> BulkJobsPayload:
    """`act` (cancel_many or retry_many) on the jobs `filter` matches, up to `limit`."""
    actor = info.context.require_actor()
    try:
        match = filters.job_filter(filter.given())
        count, more = await act(actor, match, 1000 if limit is None else limit)
    except DomainError as exc:
        return BulkJobsPayload(count=0, has_more=False, user_errors=[UserError.of(exc)])
    return BulkJobsPayload(count=count, has_more=more)


async def create_api_key(info: Info, input: CreateApiKeyInput) -> CreateApiKeyPayload:
    allowed = None if input.allowed_types in (None, strawberry.UNSET) else input.allowed_types
    try:
        key, secret = await info.context.keys.create(
            input.name,
            input.role,
            allowed,
            Priority.MEDIUM if input.max_priority is None else input.max_priority,
        )
    except DomainError as exc:
        return CreateApiKeyPayload(user_errors=[UserError.of(exc)])
    return CreateApiKeyPayload(api_key=ApiKey.of(key), secret=secret)


async def revoke_api_key(info: Info, name: str) -> bool:
    revoked = await info.context.keys.revoke(name)
    if revoked:  # its open subscriptions in this process end now; elsewhere within seconds
        info.context.feed.revoke(name)
    return revoked
