"""Job type resolvers: the list, pause, resume and limits (who may call each is the schema's
permission classes)."""

from __future__ import annotations

from collections.abc import Awaitable

import strawberry

from queuelog.api.resolvers.context import Context
from queuelog.api.types.jobs import UserError
from queuelog.api.types.queues import JobType, JobTypeLimitsInput, JobTypePayload
from queuelog.service.errors import DomainError
from queuelog.service.job_types import JobTypeView

Info = strawberry.Info[Context, None]


async def job_types(info: Info) -> list[JobType]:
    ctx = info.context
    return [JobType.of(t) for t in await ctx.job_types.visible(ctx.require_actor())]


async def pause_job_type(info: Info, type: str) -> JobTypePayload:
    ctx = info.context
    return await _payload(ctx.job_types.pause(ctx.require_actor(), type))


async def resume_job_type(info: Info, type: str) -> JobTypePayload:
    ctx = info.context
    return await _payload(ctx.job_types.resume(ctx.require_actor(), type))


async def set_job_type_limits(info: Info, type: str, limits: JobTypeLimitsInput) -> JobTypePayload:
    ctx = info.context
    return await _payload(ctx.job_types.set_limits(ctx.require_actor(), type, limits.limits()))


async def _payload(change: Awaitable[JobTypeView]) -> JobTypePayload:
    """The job type as `change` left it, or why it refused."""
    try:
        found = await change
    except DomainError as exc:
        return JobTypePayload(user_errors=[UserError.of(exc)])
    return JobTypePayload(job_type=JobType.of(found))
