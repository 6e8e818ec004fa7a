"""Resolvers of fields below the root: a job's history, an event's job. The schema
assembly wires them onto their types (`queuelog.api.schema`)."""

from __future__ import annotations

import strawberry
from graphql import GraphQLError

from queuelog.api.resolvers.context import Context, refusing_bad_input
from queuelog.api.types.jobs import Job, JobEvent
from queuelog.domain.codes import ErrorCode

Info = strawberry.Info[Context, None]


async def job_events(root: Job, info: Info, first: int | None = 100) -> list[JobEvent]:
    with refusing_bad_input():
        history = await info.context.service.history(int(root.id), 100 if first is None else first)
    return [JobEvent.of(e) for e in history]


async def event_job(root: JobEvent, info: Info) -> Job:
    ctx = info.context
    # Read once for every subscriber this event goes to, and never older than it.
    job = await ctx.service.get_since(ctx.require_actor(), root.job_id, root.event_id)
    if job is None:
        # `job` is non-null in the contract: the event then arrives as a NOT_FOUND error
        # (data null), a client error the subscription goes on after.
        raise GraphQLError(
            f"job {root.job_id} can no longer be shown to you: it was pruned, or another "
            "worker holds it now",
            extensions={"code": ErrorCode.NOT_FOUND},
        )
    return Job.of(job)
