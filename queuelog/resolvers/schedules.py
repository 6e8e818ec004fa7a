"""Schedule resolvers: admins change schedules; admins (and viewers) read them."""

from __future__ import annotations

import strawberry

from queuelog.auth.permissions import forbidden
from queuelog.graphql_types import (
    EnqueueJobPayload,
    Job,
    Schedule,
    ScheduleInput,
    SchedulePayload,
    UserError,
)
from queuelog.resolvers.context import Context
from queuelog.service.errors import DomainError, Forbidden

Info = strawberry.Info[Context, None]


async def schedules(info: Info) -> list[Schedule]:
    ctx, actor = info.context, info.context.require_actor()
    try:
        return [Schedule.of(s) for s in await ctx.schedules.list(actor)]
    except Forbidden as exc:
        raise forbidden(str(exc)) from None


async def upsert_schedule(info: Info, input: ScheduleInput) -> SchedulePayload:
    ctx, actor = info.context, info.context.require_actor()
    try:
        schedule = await ctx.schedules.upsert(actor, input.request())
    except DomainError as exc:
        return SchedulePayload(user_errors=[UserError.of(exc)])
    return SchedulePayload(schedule=Schedule.of(schedule))


async def delete_schedule(info: Info, name: str) -> bool:
    ctx, actor = info.context, info.context.require_actor()
    return await ctx.schedules.delete(actor, name)


async def run_schedule_now(info: Info, name: str) -> EnqueueJobPayload:
    ctx, actor = info.context, info.context.require_actor()
    try:
        job, created = await ctx.schedules.run_now(actor, name)
    except DomainError as exc:
        return EnqueueJobPayload(user_errors=[UserError.of(exc)])
    return EnqueueJobPayload(job=Job.of(job, actor), created=created)


async def last_job(root: Schedule, info: Info) -> Job | None:
    if root.last_job_id is None:
        return None
    ctx = info.context
    job = await ctx.service.get(ctx.require_actor(), root.last_job_id)
    return None if job is None else Job.of(job)
