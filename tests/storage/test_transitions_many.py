"""Storage conformance: the compare-and-set of several jobs in one statement
(`jobs.apply_many`, what reportJobs sends) does to each job what `jobs.apply` does to one:
only from the transition's source, only past its guard, its columns set and cleared, its
event recorded; each job with values of its own."""

from __future__ import annotations

from typing import Any

import pytest

from queuelog.domain.lifecycle import COMPARE_AND_SET, Guard, Status, Transition
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database
from tests.storage.plans import Captured
from tests.storage.rows import T0, at, events_of, insert, job
from tests.storage.test_transitions import GIVEN, LEASE_ENDS

ONE_SOURCE = [t for t in COMPARE_AND_SET if len(t.sources) == 1]


def _values(t: Transition, k: int) -> dict[str, Any]:
    """GIVEN's values, made different for job `k` where a column allows it."""
    values = {c: GIVEN[c] for c in t.sets}
    for c in values:
        if c in ("result", "progress"):
            values[c] = f'{{"k": {k}}}'
        elif c == "error":
            values[c] = f"boom {k}"
        elif c in ("run_at", "finished_at", "lease_expires_at", "progress_at"):
            values[c] = at(100 + k)
        elif c == "retry_count":
            values[c] = k
    return values


def _seed(db: Database, status: Status, worker: str = "w1") -> int:
    (job_id,) = insert(
        db,
        job(
            status=status.value,
            worker_id=worker,
            claimed_at=T0,
            lease_expires_at=LEASE_ENDS,
            finished_at=T0,
            error="before",
        ),
    )
    return job_id


@pytest.mark.parametrize("t", ONE_SOURCE, ids=lambda t: t.name)
def test_many_jobs_change_in_one_statement_as_each_would_alone(
    db: Database, t: Transition, monkeypatch: pytest.MonkeyPatch
) -> None:
    (source,) = t.sources
    held = [_seed(db, source) for _ in range(3)]
    other_status = [_seed(db, s) for s in Status if s is not source]
    others_job = _seed(db, source, worker="w2")
    ids = [*held, *other_status, others_job]
    before = {i: db.read_sync(jobs_sql.get, i) for i in ids}
    when = at(61) if t.guard is Guard.EXPIRED_LEASE else T0
    items = [(job_id, _values(t, k)) for k, job_id in enumerate(ids)]
    captured = Captured(db, monkeypatch)
    changed = db.write_sync(lambda tx: jobs_sql.apply_many(tx, t, items, worker="w1", at=when))
    assert len(captured.sent) == 1  # one statement for every job
    expected = held if t.guard is Guard.LIVE_LEASE else [*held, others_job]
    assert sorted(r.id for r in changed) == sorted(expected)
    for k, job_id in enumerate(ids):
        row, old = db.read_sync(jobs_sql.get, job_id), before[job_id]
        assert row is not None and old is not None
        if job_id not in expected:
            assert row == old
            assert events_of(db, job_id) == [(None, old.status)]
            continue
        assert row.status == t.target.value and row in changed
        for column in (c.name for c in jobs_sql.jobs.c):
            if column in t.sets:
                assert getattr(row, column) == _values(t, k)[column], column
            elif column in t.clears:
                assert getattr(row, column) is None, column
            elif column != "status":
                assert getattr(row, column) == getattr(old, column), column
        event = [(source.value, t.target.value)] if t.records_event else []
        assert events_of(db, job_id) == [(None, source.value), *event]
