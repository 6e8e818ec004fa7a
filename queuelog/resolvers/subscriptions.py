"""Subscription resolvers: follow the change feed as the caller may see it."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import strawberry

from queuelog.events.feed import EventFilter, may_see
from queuelog.resolvers.context import Context, bad_input
from queuelog.resolvers.queries import parse_id
from queuelog.schema.types import JobEvent, JobStatus

Info = strawberry.Info[Context, None]


async def job_status_changed(
    info: Info,
    job_id: strawberry.ID | None = None,
    type: str | None = None,
    statuses: list[JobStatus] | None = None,
    after: str | None = None,
) -> AsyncGenerator[JobEvent, None]:
    ctx = info.context
    actor = ctx.require_actor()
    cursor = None
    if after is not None:
        if not after.isdigit() or len(after) > 18:
            raise bad_input("after is not an event cursor", ["after"])
        cursor = int(after)
    wanted = EventFilter(
        job_id=None if job_id is None else (parse_id(job_id) or -1),
        job_type=type,
        statuses=None if statuses is None else frozenset(statuses),
    )

    def accept(e: object) -> bool:
        return wanted.matches(e) and may_see(actor.role, actor.name, e)  # type: ignore[arg-type]

    async for event in ctx.feed.follow(cursor, accept):
        yield JobEvent.of(event)
