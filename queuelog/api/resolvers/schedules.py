"""Schedule resolvers (who may call each is the schema's permission classes)."""

from __future__ import annotations

import strawberry

from queuelog.api.resolvers.context import Context
from queuelog.api.types.jobs import (
    EnqueueJobPayload,
    Job,
    UserError,
)
from queuelog.api.types.queues import (
    Schedule,
    ScheduleInput,
    SchedulePayload,
)
from queuelog.service.errors import DomainError

Info = strawberry.Info[Context, None]


async def schedules(info: Info) -> list[Schedule]:
    return [Schedule.of(s) for s in await info.context.schedules.list()]


async def upsert_schedule(info: Info, input: ScheduleInput) -> SchedulePayload:
    try:
        schedule = await info.context.schedules.upsert(input.request())
    except DomainError as exc:
        return SchedulePayload(user_errors=[UserError.of(exc)])
    return SchedulePayload(schedule=Schedule.of(schedule))


async def delete_schedule(info: Info, name: str) -> bool:
    return await info.context.schedules.delete(name)


async def run_schedule_now(info: Info, name: str) -> EnqueueJobPayload:
    try:
        job, created = await info.context.schedules.run_now(name)
    except DomainError as exc:
        return EnqueueJobPayload(user_errors=[UserError.of(exc)])
    return EnqueueJobPayload(job=Job.of(job), created=created)


async def last_job(root: Schedule, info: Info) -> Job | None:
    """The job enqueued at the schedule's last run, if the viewer may see it."""
    if root.last_job_id is None:
        return None
    ctx = info.context
    job = await ctx.service.get(ctx.require_actor(), root.last_job_id)
    return None if job is None else Job.of(job)
