"""The job state machine: every status, and every transition between them, in one table.

Each transition names the statuses it may start from, the status it ends in, the columns it
sets (besides `status`), the guard the holder of the job must pass, and whether it records a
status-change event. Storage applies a transition as one compare-and-set on those statuses
and that guard; the service picks the transition and computes the values of its columns.
This module imports nothing of queuelog: storage and service both read it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Status(enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


PENDING, RUNNING, COMPLETED, FAILED, CANCELLED = (s.value for s in Status)
FINISHED = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)


class Guard(enum.Enum):
    """What the compare-and-set checks besides the status."""

    NONE = "none"
    # The caller is the job's worker and its lease is live at the given instant.
    LIVE_LEASE = "live_lease"
    # The job's lease ended before the given instant (whoever holds it).
    EXPIRED_LEASE = "expired_lease"


@dataclass(frozen=True, slots=True)
class Transition:
    name: str
    sources: tuple[Status, ...]  # empty: the job is created by it
    target: Status
    sets: frozenset[str]  # the columns whose values the service gives
    clears: frozenset[str] = frozenset()  # the columns it sets to NULL
    guard: Guard = Guard.NONE
    records_event: bool = True  # a status-change event (previous status -> target)

    @property
    def source_values(self) -> tuple[str, ...]:
        return tuple(s.value for s in self.sources)


_RETRY_LATER = frozenset({"retry_count", "error", "run_at", "updated_at"})
_FINISH = frozenset({"finished_at", "updated_at"})

ENQUEUE = Transition(
    "enqueue",
    (),
    Status.PENDING,
    frozenset(
        {"type", "payload", "priority", "retry_count", "max_retries", "idempotency_key"}
        | {"request_hash", "producer", "run_at", "created_at", "updated_at", "concurrency_key"}
    ),
)
CLAIM = Transition(
    "claim",
    (Status.PENDING,),
    Status.RUNNING,
    frozenset({"worker_id", "claimed_at", "lease_expires_at", "updated_at"}),
)
HEARTBEAT = Transition(
    "heartbeat",
    (Status.RUNNING,),
    Status.RUNNING,
    frozenset({"lease_expires_at", "updated_at"}),
    guard=Guard.LIVE_LEASE,
    records_event=False,
)
# A heartbeat that also stores the worker's progress report.
HEARTBEAT_WITH_PROGRESS = Transition(
    "heartbeat_with_progress",
    (Status.RUNNING,),
    Status.RUNNING,
    frozenset({"lease_expires_at", "updated_at", "progress", "progress_at"}),
    guard=Guard.LIVE_LEASE,
    records_event=False,
)
COMPLETE = Transition(
    "complete",
    (Status.RUNNING,),
    Status.COMPLETED,
    _FINISH | {"result"},
    frozenset({"lease_expires_at"}),
    guard=Guard.LIVE_LEASE,
)
FAIL_AND_RETRY = Transition(
    "fail_and_retry",
    (Status.RUNNING,),
    Status.PENDING,
    _RETRY_LATER,
    frozenset({"claimed_at", "lease_expires_at"}),
    guard=Guard.LIVE_LEASE,
)
FAIL = Transition(
    "fail",
    (Status.RUNNING,),
    Status.FAILED,
    _FINISH | {"error"},
    frozenset({"lease_expires_at"}),
    guard=Guard.LIVE_LEASE,
)
CANCEL = Transition(
    "cancel",
    (Status.PENDING, Status.RUNNING),
    Status.CANCELLED,
    _FINISH,
    frozenset({"lease_expires_at"}),
)
RETRY = Transition(
    "retry",
    (Status.FAILED, Status.CANCELLED),
    Status.PENDING,
    frozenset({"retry_count", "run_at", "updated_at"}),
    frozenset({"claimed_at", "lease_expires_at", "finished_at"}),
)
# A claim whose answer could not be delivered (its client went away while it waited): the
# job goes back to the queue at once, the attempt not counted, by the server for the holder.
RELEASE = Transition(
    "release",
    (Status.RUNNING,),
    Status.PENDING,
    frozenset({"updated_at"}),
    frozenset({"claimed_at", "lease_expires_at"}),
    guard=Guard.LIVE_LEASE,
)
# An expired lease takes the claim away (`claimed_at` cleared), whether the job goes back to
# the queue or, its retries spent, fails: its last worker is told it lost the job.
RESCUE_AND_RETRY = Transition(
    "rescue_and_retry",
    (Status.RUNNING,),
    Status.PENDING,
    _RETRY_LATER,
    frozenset({"claimed_at", "lease_expires_at"}),
    guard=Guard.EXPIRED_LEASE,
)
RESCUE_AND_FAIL = Transition(
    "rescue_and_fail",
    (Status.RUNNING,),
    Status.FAILED,
    _FINISH | {"error"},
    frozenset({"claimed_at", "lease_expires_at"}),
    guard=Guard.EXPIRED_LEASE,
)

TRANSITIONS: tuple[Transition, ...] = (
    ENQUEUE,
    CLAIM,
    HEARTBEAT,
    HEARTBEAT_WITH_PROGRESS,
    COMPLETE,
    FAIL_AND_RETRY,
    FAIL,
    CANCEL,
    RETRY,
    RELEASE,
    RESCUE_AND_RETRY,
    RESCUE_AND_FAIL,
)
# Applied by storage's own statements: an insert (ENQUEUE) and the claim's pick (CLAIM).
# Every other transition is a compare-and-set on one job (`storage.jobs.apply`).
COMPARE_AND_SET = tuple(t for t in TRANSITIONS if t not in (ENQUEUE, CLAIM))


def lost_by_rescue(status: str, claimed_at: object) -> bool:
    """Whether a job its worker no longer holds was taken from it by an expired lease (or
    given back by a failure): not running, and not claimed since."""
    return status in (PENDING, FAILED) and claimed_at is None
