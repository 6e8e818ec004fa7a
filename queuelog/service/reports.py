"""JobReports: a worker's outcomes of several jobs reported together (`reportJobs`). A part of
`JobService`.

Every outcome of a call commits in one transaction, with one compare-and-set statement per
kind of outcome (complete, fail and retry, fail) for the whole batch. Only the outcomes
those statements did not apply are then judged one by one, by the rules completeJob and
failJob follow (`service.ownership`: a repeat of an outcome that went through answers as
the first did; else the refusal). A refused outcome changes nothing of the others.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from queuelog.config import Settings
from queuelog.domain.lifecycle import COMPLETE, PENDING, Transition
from queuelog.service import errors, ownership, validation
from queuelog.service.models import Actor, Job
from queuelog.service.observer import JobObserver
from queuelog.service.sanitize import sanitize_error
from queuelog.service.visibility import shown
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database
from queuelog.storage.tx import Tx

REPORT_MAX = 100


@dataclass(frozen=True, slots=True)
class Outcome:
    """One outcome asked for: without `error` the job completes with `result`; with it the
    attempt fails. `job_id` None: the id names no job."""

    job_id: int | None
    result: Any = None
    error: str | None = None
    retryable: bool = True


@dataclass(frozen=True, slots=True)
class Reported:
    """What one outcome did: the job as it left it (None when refused with NOT_FOUND),
    whether a failed job will be retried, or why it was refused."""

    job: Job | None
    will_retry: bool = False
    refused: errors.DomainError | None = None


@dataclass(frozen=True, slots=True)
class _Checked:
    """An outcome whose arguments are valid: the serialized result or the error's text."""

    at: int  # its place among the outcomes given
    job_id: int
    fails: bool
    text: str | None
    retryable: bool


@dataclass(frozen=True, slots=True)
class _Applied:
    """An outcome as its transaction left it; `started` when it ended an attempt now (the
    observer is told of those, after the commit)."""

    at: int
    reported: Reported
    started: datetime | None = None
    ended: bool = False


def _located(exc: errors.DomainError, at: int) -> errors.DomainError:
    """`exc` with its field named from the mutation's arguments (`outcomes`, its place)."""
    exc.field = ["outcomes", str(at), *(exc.field or [])]
    return exc


class JobReports:
    db: Database
    settings: Settings
    clock: Callable[[], datetime]
    observer: JobObserver

    def _failure(
        self, row: Any, now: datetime, error: str, retryable: bool
    ) -> tuple[Transition, dict[str, Any]]:
        raise NotImplementedError  # JobService's: the one rule of a failed attempt

    def _completion(self, result: str | None, now: datetime) -> dict[str, Any]:
        raise NotImplementedError  # JobService's: the values of COMPLETE

    async def report(self, actor: Actor, outcomes: Sequence[Outcome]) -> list[Reported]:
        """Apply 1 to REPORT_MAX outcomes of jobs `actor` holds in one transaction; what each
        did, in the order given. Each is judged on its own; more than REPORT_MAX, or none,
        is refused whole (ValidationFailed), and nothing changes."""
        if not 1 <= len(outcomes) <= REPORT_MAX:
            raise errors.ValidationFailed(
                f"give 1 to {REPORT_MAX} outcomes, not {len(outcomes)}", ["outcomes"]
            )
        answers: dict[int, Reported] = {}
        checked: list[_Checked] = []
        for at, outcome in enumerate(outcomes):
            try:
                checked.append(self._check(at, outcome))
            except errors.DomainError as exc:
                answers[at] = Reported(exc.job, refused=_located(exc, at))
        if checked:
            for applied in await self.db.write(self._report, actor, checked):
                answers[applied.at] = applied.reported
                job = applied.reported.job
                if applied.ended and job is not None:
                    self.observer.finished(job, applied.started, applied.reported.will_retry)
        return [answers[at] for at in range(len(outcomes))]

    def _check(self, at: int, outcome: Outcome) -> _Checked:
        """The outcome's arguments checked, as completeJob and failJob check theirs."""
        if outcome.job_id is None:
            raise errors.NotFound("no such job", ["id"])
        if outcome.error is not None:
            text = sanitize_error(outcome.error, self.settings.error_max_chars)
            return _Checked(at, outcome.job_id, True, text, outcome.retryable)
        result: str | None = None
        if outcome.result is not None:
            limit = self.settings.payload_max_bytes
            result = validation.serialize(outcome.result, limit, ["result"], "result")
        return _Checked(at, outcome.job_id, False, result, outcome.retryable)

    def _report(self, tx: Tx, actor: Actor, checked: list[_Checked]) -> list[_Applied]:
        """The outcomes in `tx`: each job's first outcome through the compare-and-sets,
        then every outcome they did not apply judged against the job as it now is."""
        now = self.clock()
        first: dict[int, _Checked] = {}
        for c in checked:
            first.setdefault(c.job_id, c)  # a job's later outcomes are judged after it
        by_transition: dict[Transition, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        started: dict[int, datetime | None] = {}
        for c in first.values():
            if not c.fails:
                by_transition[COMPLETE].append((c.job_id, self._completion(c.text, now)))
        failing = [c for c in first.values() if c.fails]
        if failing:  # which failure, and its backoff, depend on the job
            rows = {r.id: r for r in jobs_sql.get_many(tx, [c.job_id for c in failing])}
            for c in failing:
                row = rows.get(c.job_id)
                if row is not None and ownership.holds(actor, row, now):
                    assert c.text is not None
                    transition, values = self._failure(row, now, c.text, c.retryable)
                    by_transition[transition].append((c.job_id, values))
                    started[c.job_id] = row.claimed_at
        changed: dict[int, Any] = {}
        for transition, items in by_transition.items():
            for row in jobs_sql.apply_many(tx, transition, items, worker=actor.name, at=now):
                changed[row.id] = row
        others = {c.job_id for c in checked if c.job_id not in changed}
        current = {r.id: r for r in jobs_sql.get_many(tx, sorted(others))} if others else {}
        current.update(changed)
        out = []
        for c in checked:
            if first[c.job_id] is c and c.job_id in changed:
                row = changed[c.job_id]
                job = shown(actor, Job.from_row(row))
                retried = c.fails and row.status == PENDING
                start = started[c.job_id] if c.fails else row.claimed_at
                out.append(_Applied(c.at, Reported(job, retried), start, ended=True))
            else:
                out.append(_Applied(c.at, self._judged(tx, actor, c, current.get(c.job_id))))
        return out

    def _judged(self, tx: Tx, actor: Actor, c: _Checked, row: Any) -> Reported:
        """An outcome the compare-and-sets did not apply: as the first answer when it repeats
        the same worker's outcome that went through, else its refusal."""
        if row is not None:
            if c.fails and ownership.failed_before(actor, row):
                return Reported(shown(actor, Job.from_row(row)), row.status == PENDING)
            if not c.fails and ownership.completed_before(actor, row):
                return Reported(shown(actor, Job.from_row(row)))
        exc = _located(ownership.refusal(tx, actor, row, c.job_id), c.at)
        return Reported(exc.job, refused=exc)
