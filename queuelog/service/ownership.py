"""Who may settle a running job, and what a caller whose settlement was refused is told."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from queuelog.domain.lifecycle import COMPLETED, FAILED, PENDING, RELEASE, RUNNING, lost_by_rescue
from queuelog.service import errors
from queuelog.service.models import Actor, Job
from queuelog.service.visibility import may_see, shown
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.tx import Tx

LEASE_EXPIRED = "lease expired"  # the error a rescued job's attempt records


def holds(actor: Actor, row: Any, now: datetime) -> bool:
    """Whether `actor` holds the job `row` under a lease still live at `now`."""
    return bool(
        row.status == RUNNING
        and row.worker_id == actor.name
        and row.lease_expires_at is not None
        and row.lease_expires_at > now
    )


def completed_before(actor: Actor, row: Any) -> bool:
    """Whether `actor`'s earlier completion of the job `row` went through: a repeat of it
    answers as the first did (its answer may have been lost)."""
    return bool(row.status == COMPLETED and row.worker_id == actor.name)


def failed_before(actor: Actor, row: Any) -> bool:
    """Whether `actor`'s earlier failure report of the job `row` went through (the job
    failed, or is waiting for its retry, by that worker's report and not by an expired
    lease): a repeat answers as the first did."""
    return bool(
        row.status in (PENDING, FAILED)
        and row.worker_id == actor.name
        and row.error is not None
        and row.error != LEASE_EXPIRED
        and (row.status == FAILED or row.claimed_at is None)
    )


def release(tx: Tx, actor: Actor, job_ids: Sequence[int], now: datetime) -> int:
    """Give back the jobs among `job_ids` that `actor` holds: PENDING again at once, the
    attempt not counted. Returns how many were given back."""
    given = [
        jobs_sql.apply(tx, RELEASE, job_id, {"updated_at": now}, worker=actor.name, at=now)
        for job_id in job_ids
    ]
    return sum(row is not None for row in given)


def refusal(tx: Tx, actor: Actor, row: Any, job_id: int) -> errors.DomainError:
    """Why a holder-only transition was refused. NOT_JOB_OWNER is only for a job the caller
    held: its lease expired, whatever became of the job since. The last holder of a job
    that was cancelled or finished hears INVALID_STATE with the job, as does an admin,
    who may see every job. To anyone else the job does not exist: a worker learns nothing
    about jobs it never held, not even whether one is running."""
    if row is None:
        return errors.NotFound(f"no job {job_id}", ["id"])
    if row.worker_id == actor.name:
        if row.status == RUNNING:
            return errors.NotJobOwner("your lease on this job has expired", ["id"])
        if lost_by_rescue(row.status, row.claimed_at):
            return errors.NotJobOwner(
                "your lease on this job expired and the job was given back to the queue", ["id"]
            )
    elif jobs_sql.held_before(tx, job_id, actor.name):
        return errors.NotJobOwner("your lease on this job expired; another worker took it", ["id"])
    if may_see(actor, row.producer, row.worker_id):
        why = (
            "another worker holds the job"
            if row.status == RUNNING
            else f"the job is {row.status}, not running"
        )
        return errors.InvalidState(why, ["id"], shown(actor, Job.from_row(row)))
    return errors.NotFound(f"no job {job_id}", ["id"])
