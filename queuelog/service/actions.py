"""JobActions: what producers and admins do to jobs that exist: cancel and retry, one job or
every job a filter matches (`service.bulk`). A part of `JobService`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from queuelog.domain.lifecycle import CANCEL, RETRY
from queuelog.service import bulk, errors
from queuelog.service.models import Actor, Job
from queuelog.service.visibility import may_see, shown
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database
from queuelog.storage.filters import JobFilter
from queuelog.storage.tx import Tx


class JobActions:
    db: Database
    clock: Callable[[], datetime]

    async def cancel(self, actor: Actor, job_id: int) -> Job:
        return await self.db.write(self._cancel, actor, job_id)

    def _cancel(self, tx: Tx, actor: Actor, job_id: int) -> Job:
        now = self.clock()
        row = jobs_sql.get(tx, job_id)
        if row is None or not may_see(actor, row.producer, row.worker_id):
            raise errors.NotFound(f"no job {job_id}", ["id"])
        done = jobs_sql.apply(tx, CANCEL, job_id, bulk.cancel_values(now))
        if done is None:
            raise errors.InvalidState(
                f"a {row.status} job cannot be cancelled", ["id"], self._shown(actor, row)
            )
        return self._shown(actor, done)

    async def retry(self, actor: Actor, job_id: int) -> Job:
        return await self.db.write(self._retry, actor, job_id)

    def _retry(self, tx: Tx, actor: Actor, job_id: int) -> Job:
        now = self.clock()
        row = jobs_sql.get(tx, job_id)
        if row is None:
            raise errors.NotFound(f"no job {job_id}", ["id"])
        done = jobs_sql.apply(tx, RETRY, job_id, bulk.retry_values(now))
        if done is None:
            raise errors.InvalidState(
                f"only failed or cancelled jobs can be retried; this one is {row.status}",
                ["id"],
                self._shown(actor, row),
            )
        return self._shown(actor, done)

    async def cancel_many(self, actor: Actor, match: JobFilter, limit: int) -> tuple[int, bool]:
        """Cancel up to `limit` jobs that `actor` may see and `match`; how many, and whether
        more match."""
        return await bulk.apply_to_matching(self.db, self.clock, actor, CANCEL, match, limit)

    async def retry_many(self, actor: Actor, match: JobFilter, limit: int) -> tuple[int, bool]:
        """Retry up to `limit` failed or cancelled jobs that `match`, as `retry` does."""
        return await bulk.apply_to_matching(self.db, self.clock, actor, RETRY, match, limit)

    @staticmethod
    def _shown(actor: Actor, row: Any) -> Job:
        return shown(actor, Job.from_row(row))
