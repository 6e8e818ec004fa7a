"""Query resolvers."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import strawberry
from strawberry.types.nodes import SelectedField, Selection

from queuelog.api.resolvers.context import Context, refusing_bad_input
from queuelog.api.types.jobs import (
    ApiKey,
    Job,
    JobConnection,
    JobEdge,
    JobStatus,
    PageInfo,
    QueueStats,
    Viewer,
)
from queuelog.api.types.queues import (
    JobFilter,
    ThroughputBucket,
)
from queuelog.service import filters
from queuelog.service.models import Priority

Info = strawberry.Info[Context, None]


def _selects(selections: Iterable[Selection], name: str) -> bool:
    """Whether `selections` select the field `name`, directly or through a fragment (a
    field under @skip or @include counts as selected)."""
    return any(
        s.name == name if isinstance(s, SelectedField) else _selects(s.selections, name)
        for s in selections
    )


def parse_id(value: str) -> int | None:
    """A job id as the API shows it (a decimal string), or None when it cannot be one."""
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 18 else None


def viewer(info: Info) -> Viewer:
    actor = info.context.require_actor()
    return Viewer(
        name=actor.name,
        role=actor.role,
        allowed_types=None if actor.allowed_types is None else list(actor.allowed_types),
        max_priority=Priority.CRITICAL if actor.is_admin else actor.max_priority,
    )


async def job(info: Info, id: strawberry.ID) -> Job | None:
    actor = info.context.require_actor()
    job_id = parse_id(id)
    if job_id is None:
        return None
    found = await info.context.service.get(actor, job_id)
    return None if found is None else Job.of(found)


async def jobs(
    info: Info,
    status: JobStatus | None = None,
    type: str | None = None,
    first: int | None = 50,
    after: str | None = None,
    filter: JobFilter | None = None,
) -> JobConnection:
    actor = info.context.require_actor()
    # The total is a read of its own (for a worker, a count of every matching job): a
    # frontend paging without it does not pay for it.
    total = any(_selects(f.selections, "totalCount") for f in info.selected_fields)
    with refusing_bad_input():
        match = filters.EVERY_JOB if filter is None else filters.job_filter(filter.given())
        page = await info.context.service.page(
            actor,
            status=status,
            job_type=type,
            first=50 if first is None else first,
            after=after,
            total=total,
            match=match,
        )
    nodes = [Job.of(j) for j in page.jobs]
    return JobConnection(
        edges=[JobEdge(cursor=str(n.id), node=n) for n in nodes],
        nodes=nodes,
        page_info=PageInfo(
            has_next_page=page.has_next, end_cursor=str(nodes[-1].id) if nodes else None
        ),
        total_count=page.total,
    )


async def throughput(
    info: Info,
    since: datetime,
    until: datetime | None = None,
    bucket_seconds: int | None = 60,
    type: str | None = None,
) -> list[ThroughputBucket]:
    actor = info.context.require_actor()
    with refusing_bad_input():
        found = await info.context.service.throughput(
            actor,
            since=since,
            until=until,
            bucket_seconds=60 if bucket_seconds is None else bucket_seconds,
            job_type=type,
        )
    return [ThroughputBucket.of(b) for b in found]


async def queue_stats(info: Info, type: str | None = None) -> QueueStats:
    actor = info.context.require_actor()
    with refusing_bad_input():
        counts = await info.context.service.counts(actor, type)
    return QueueStats(**counts)


async def api_keys(info: Info) -> list[ApiKey]:
    return [ApiKey.of(k) for k in await info.context.keys.list()]
