"""JobService's reads: a job, a page of jobs, counts by status and a job's history, each
as the caller may see it."""

from __future__ import annotations

import functools
from datetime import UTC, datetime

from queuelog.service import errors, validation
from queuelog.service.filters import EVERY_JOB, JobFilter
from queuelog.service.models import Actor, Job, JobEvent, Page, Status
from queuelog.service.throughput import Bucket, throughput
from queuelog.service.visibility import may_see, scope, shown
from queuelog.singleflight import SingleFlight
from queuelog.storage import events as events_sql
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database

PAGE_MAX = 100
EVENTS_MAX = 1_000


class SharedReads:
    """Reads of one job shared by everyone who asks meanwhile: a status change fanned out
    to a thousand subscribers whose selection shows the job reads it once, not a thousand
    times (each a thread hop and a transaction).

    A caller shows the job with an event, and joins a read in flight only if that read
    began for an event at least as new as its own. Event ids follow commit order, and a
    read begins after its event was committed, so no caller is shown the job as it was
    before its event; a caller with a newer event starts a read of its own."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._reads: SingleFlight[int, Job | None] = SingleFlight()

    async def get(self, job_id: int, since: int) -> Job | None:
        """The job as it is now, read after event `since` was committed; None if gone."""
        return await self._reads.run(job_id, since, functools.partial(self._read, job_id))

    async def _read(self, job_id: int) -> Job | None:
        row = await self.db.read(jobs_sql.get, job_id)
        return None if row is None else Job.from_row(row)


class JobReads:
    """The reads `JobService` inherits: scoped and shown by `service.visibility`, never
    writing."""

    db: Database
    shared: SharedReads

    async def get(self, actor: Actor, job_id: int) -> Job | None:
        row = await self.db.read(jobs_sql.get, job_id)
        if row is None or not may_see(actor, row.producer, row.worker_id):
            return None
        return shown(actor, Job.from_row(row))

    async def get_since(self, actor: Actor, job_id: int, event_id: int) -> Job | None:
        """`get` for showing the job with its event `event_id`: at least as new as that
        event, and read once for every caller that asks meanwhile (`SharedReads`)."""
        job = await self.shared.get(job_id, event_id)
        if job is None or not may_see(actor, job.producer, job.worker_id):
            return None
        return shown(actor, job)

    async def page(
        self,
        actor: Actor,
        *,
        status: Status | None,
        job_type: str | None,
        first: int,
        after: str | None,
        total: bool = True,
        match: JobFilter = EVERY_JOB,
    ) -> Page:
        """A page of the jobs the actor may see, newest first; with `total`, how many match
        (for a worker, a count of them all: leave it out unless it is shown)."""
        validation.bounded(first, 1, PAGE_MAX, "first", ["first"])
        before_id = None
        if after is not None:
            if not (after.isascii() and after.isdigit()) or len(after) > 18:
                raise errors.ValidationFailed("after is not a cursor from this list", ["after"])
            before_id = int(after)
        validation.filter_text(job_type, ["type"])
        rows, more, count = await self.db.read(
            jobs_sql.page,
            scope=scope(actor),
            status=None if status is None else status.value,
            job_type=job_type,
            first=first,
            before_id=before_id,
            count=total,
            match=match,
        )
        return Page([shown(actor, Job.from_row(r)) for r in rows], more, count)

    async def counts(self, actor: Actor, job_type: str | None) -> dict[str, int]:
        validation.filter_text(job_type, ["type"])
        return await self.db.read(jobs_sql.counts, scope=scope(actor), job_type=job_type)

    async def throughput(
        self,
        actor: Actor,
        *,
        since: datetime,
        until: datetime | None,
        bucket_seconds: int,
        job_type: str | None,
    ) -> list[Bucket]:
        """Counts of what happened to the jobs `actor` may see, per bucket from `since`."""
        return await throughput(
            self.db,
            actor,
            since=since,
            until=datetime.now(UTC) if until is None else until,
            bucket_seconds=bucket_seconds,
            job_type=job_type,
        )

    async def history(self, job_id: int, first: int) -> list[JobEvent]:
        """A job's events, oldest first (the caller has already been shown the job)."""
        validation.bounded(first, 1, EVENTS_MAX, "first", ["first"])
        rows = await self.db.read(events_sql.for_job, job_id, first)
        return [JobEvent.from_row(r) for r in rows]
