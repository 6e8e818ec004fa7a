"""Subscription resolvers: follow the change feed as the caller may see it."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator
from contextlib import contextmanager

import strawberry
from graphql import GraphQLError

from queuelog.api.resolvers.context import Context, bad_input, refusing_bad_input
from queuelog.api.resolvers.queries import parse_id
from queuelog.api.types.jobs import JobEvent, JobProgress, JobStatus
from queuelog.auth.permissions import unauthenticated
from queuelog.domain.codes import ErrorCode
from queuelog.events.feed import CursorAhead, CursorExpired, Interest, KeyRevoked
from queuelog.events.progress import progress_watch
from queuelog.events.quota import TooManySubscriptions
from queuelog.service import validation

Info = strawberry.Info[Context, None]
CURSOR_DIGITS = 18


def parse_cursor(after: str) -> int:
    if not (after.isascii() and after.isdigit() and len(after) <= CURSOR_DIGITS):
        raise bad_input("after is not an event cursor", ["after"])
    return int(after)


@contextmanager
def _held(ctx: Context, name: str) -> Iterator[None]:
    """One of the key's subscriptions, within `QUEUELOG_MAX_SUBSCRIPTIONS_PER_KEY`."""
    try:
        with ctx.feed.per_key.held(name, ctx.service.settings.max_subscriptions_per_key):
            yield
    except TooManySubscriptions as exc:
        raise GraphQLError(str(exc), extensions={"code": "TOO_MANY_SUBSCRIPTIONS"}) from None


async def job_status_changed(
    info: Info,
    job_id: strawberry.ID | None = None,
    type: str | None = None,
    statuses: list[JobStatus] | None = None,
    after: str | None = None,
) -> AsyncGenerator[JobEvent, None]:
    ctx = info.context
    viewer = ctx.require_actor()
    with refusing_bad_input():
        job_type = validation.filter_text(type, ["type"])
    interest = Interest(
        viewer=viewer,
        job_id=None if job_id is None else (parse_id(job_id) or -1),
        job_type=job_type,
        statuses=None if statuses is None else frozenset(statuses),
    )
    cursor = None if after is None else parse_cursor(after)
    try:
        with _held(ctx, viewer.name):
            if ctx.session is not None:
                await ctx.session.check()
            if cursor is not None:
                await ctx.feed.check_cursor(cursor)
            async for event in ctx.feed.follow(cursor, interest, ctx.session):
                yield JobEvent.of(event)
    except CursorAhead as exc:
        raise bad_input(str(exc), ["after"]) from None
    except CursorExpired as exc:
        raise GraphQLError(
            f"{exc}; read the job's current state and subscribe again without `after`",
            extensions={"code": ErrorCode.CURSOR_EXPIRED, "field": ["after"]},
        ) from None
    except KeyRevoked as exc:
        ctx.actor = None
        raise unauthenticated(str(exc)) from None


async def job_progress(info: Info, job_id: strawberry.ID) -> AsyncGenerator[JobProgress, None]:
    """Each new progress report of a job the caller may see; a job it may not see (or that
    does not exist) completes at once, revealing nothing."""
    ctx = info.context
    actor = ctx.require_actor()
    parsed = parse_id(job_id)
    if parsed is None or await ctx.service.get(actor, parsed) is None:
        return
    sent = None
    try:
        with _held(ctx, actor.name):
            async for row in progress_watch(ctx.feed).follow(parsed, ctx.session):
                if ctx.session is not None:
                    await ctx.session.check()
                if row is None or row.progress_at is None or row.progress_at == sent:
                    continue
                job = await ctx.service.get(actor, parsed)
                if job is None or job.progress_at is None:
                    return
                sent = job.progress_at
                yield JobProgress.of(job)
    except KeyRevoked as exc:
        ctx.actor = None
        raise unauthenticated(str(exc)) from None
