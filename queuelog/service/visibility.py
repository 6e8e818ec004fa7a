"""Who sees what: the one home of the visibility rule.

Admins and viewers see every job; a producer the jobs it enqueued; a worker the jobs it
holds or last held. The same rule decides whether an actor may see one job (`may_see`),
which rows its lists, counts and event replays read (`scope`), and which fields of a job it
is shown (`shown`): a job's error text only to admins and viewers, its idempotency key only
to its producer, admins and viewers. Every job the service hands out has passed through
`shown`.
"""

from __future__ import annotations

import dataclasses

from queuelog.service.models import Actor, Job, Role
from queuelog.storage.scope import EVERYTHING, Scope


def reads_everything(actor: Actor) -> bool:
    """Whether `actor` reads every job and every field of it (admins and viewers)."""
    return actor.role is Role.ADMIN or actor.role is Role.VIEWER


def may_see(actor: Actor, producer: str, worker_id: str | None) -> bool:
    """Whether `actor` may see a job (or an event of a job) of `producer`, held or last
    held by `worker_id`."""
    if reads_everything(actor):
        return True
    if actor.role is Role.PRODUCER:
        return producer == actor.name
    return worker_id == actor.name


def scope(actor: Actor) -> Scope:
    """The rows of `jobs` and `job_events` that `actor` may read."""
    if actor.role is Role.PRODUCER:
        return Scope(producer=actor.name)
    if actor.role is Role.WORKER:
        return Scope(worker=actor.name)
    return EVERYTHING


def shown(actor: Actor, job: Job) -> Job:
    """`job` with the fields `actor` may not see left out (a copy when any is; the job
    itself, which may be shared with other callers, is never changed)."""
    everything = reads_everything(actor)
    hide_error = job.error is not None and not everything
    hide_key = job.idempotency_key is not None and not (
        everything or (actor.role is Role.PRODUCER and actor.name == job.producer)
    )
    if not (hide_error or hide_key):
        return job
    return dataclasses.replace(
        job,
        error=None if hide_error else job.error,
        idempotency_key=None if hide_key else job.idempotency_key,
    )
