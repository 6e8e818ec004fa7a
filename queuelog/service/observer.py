"""What the job service reports after each commit, for whoever watches it (the server's
metrics). The service calls an observer only once its transaction has committed, so an
observer hears only what happened; the default one hears nothing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from queuelog.service.models import Job


class Expired(NamedTuple):
    """A lease that ran out: the job's type and whether it will be tried again."""

    job_type: str
    retried: bool


class JobObserver:
    """Every method a no-op: subclasses override what they want to hear."""

    def enqueued(self, jobs: Sequence[Job]) -> None:
        """New jobs (an idempotent enqueue that found its job is not one)."""

    def claimed(self, jobs: Sequence[Job]) -> None:
        """Jobs a worker has just claimed (their `claimed_at` set)."""

    def finished(self, job: Job, started: datetime | None, retried: bool) -> None:
        """An attempt ended by its worker: `job` after it (COMPLETED, FAILED, or PENDING
        again when `retried`), and when the attempt started. Told once per attempt: a
        worker's repeated completeJob or failJob, answered as the first, is not told."""

    def leases_expired(self, expired: Sequence[Expired]) -> None:
        """Leases that ran out and were taken back."""


class Observers(JobObserver):
    """Several observers, each told everything, in the order given."""

    def __init__(self, *observers: JobObserver) -> None:
        self.observers = observers

    def enqueued(self, jobs: Sequence[Job]) -> None:
        for observer in self.observers:
            observer.enqueued(jobs)

    def claimed(self, jobs: Sequence[Job]) -> None:
        for observer in self.observers:
            observer.claimed(jobs)

    def finished(self, job: Job, started: datetime | None, retried: bool) -> None:
        for observer in self.observers:
            observer.finished(job, started, retried)

    def leases_expired(self, expired: Sequence[Expired]) -> None:
        for observer in self.observers:
            observer.leases_expired(expired)
