"""Who may settle a running job, and what a caller whose settlement was refused is told."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from queuelog.lifecycle import RUNNING, lost_by_rescue
from queuelog.service import errors
from queuelog.service.models import Actor, Job, Role
from queuelog.service.visibility import may_see, shown
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.tx import Tx


def holds(actor: Actor, row: Any, now: datetime) -> bool:
    """Whether `actor` holds the job `row` under a lease still live at `now`."""
    return bool(
        row.status == RUNNING
        and row.worker_id == actor.name
        and row.lease_expires_at is not None
        and row.lease_expires_at > now
    )


def refusal(tx: Tx, actor: Actor, row: Any, job_id: int) -> errors.DomainError:
    """Why a holder-only transition was refused. A worker that lost the job (its lease
    expired, whatever became of the job since) hears NOT_JOB_OWNER; the last holder of a
    job that was cancelled or finished hears INVALID_STATE with the job; a caller that
    never held the job learns nothing beyond NOT_JOB_OWNER for a job someone else runs."""
    if row is None:
        return errors.NotFound(f"no job {job_id}", ["id"])
    mine = row.worker_id == actor.name
    if row.status == RUNNING:
        if mine:
            return errors.NotJobOwner("your lease on this job has expired", ["id"])
        return errors.NotJobOwner("the job is held by another worker", ["id"])
    if mine and lost_by_rescue(row.status, row.claimed_at):
        return errors.NotJobOwner(
            "your lease on this job expired and the job was given back to the queue", ["id"]
        )
    if may_see(actor, row.producer, row.worker_id):
        return errors.InvalidState(
            f"the job is {row.status}, not running", ["id"], shown(actor, Job.from_row(row))
        )
    if actor.role is Role.WORKER and jobs_sql.held_before(tx, job_id, actor.name):
        return errors.NotJobOwner("your lease on this job expired; another worker took it", ["id"])
    return errors.NotFound(f"no job {job_id}", ["id"])
