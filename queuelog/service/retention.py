"""Retention: finished jobs older than their status's retention age are deleted with their
events, in bounded batches so that no transaction holds the write lock for long."""

from __future__ import annotations

from datetime import timedelta

from queuelog.domain.lifecycle import Status
from queuelog.service.jobs import JobService
from queuelog.storage import jobs as jobs_sql


async def prune(service: JobService, *, dry_run: bool = False) -> dict[str, int]:
    """Delete (or, with dry_run, count) what retention says is due; returns counts by status."""
    s = service.settings
    now = service.clock()
    ages = {
        Status.COMPLETED: timedelta(days=s.retention_completed_days),
        Status.CANCELLED: timedelta(days=s.retention_completed_days),
        Status.FAILED: timedelta(days=s.retention_failed_days),
    }
    counts: dict[str, int] = {}
    for finished, age in ages.items():
        status = finished.value
        before = now - age
        if dry_run:
            counts[status] = await service.db.read(jobs_sql.count_prunable, status, before)
            continue
        total = 0
        while True:
            n = await service.db.write(jobs_sql.prune, status, before, s.prune_batch_size)
            total += n
            if n < s.prune_batch_size:
                break
        counts[status] = total
    return counts
