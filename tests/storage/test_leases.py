"""Storage conformance: transitions (a compare-and-set on status, worker and lease) and the
rescue scan of expired leases."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from queuelog.domain.lifecycle import CANCEL, COMPLETE, HEARTBEAT
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database
from tests.storage.plans import Captured, pg_generic_plan, pg_nodes, sqlite_plan
from tests.storage.rows import T0, at, claim, events_of, insert, job

# -- transitions ----------------------------------------------------------------------------


def test_a_transition_is_a_compare_and_set(db: Database) -> None:
    (job_id,) = insert(db, job())
    before = db.read_sync(jobs_sql.get, job_id)
    done = {"result": None, "finished_at": at(1), "updated_at": at(1)}
    wrong = db.write_sync(lambda tx: jobs_sql.apply(tx, COMPLETE, job_id, done, worker="w1", at=T0))
    assert wrong is None  # not running
    assert db.read_sync(jobs_sql.get, job_id) == before
    assert events_of(db, job_id) == [(None, "pending")]

    cancelled = db.write_sync(
        lambda tx: jobs_sql.apply(tx, CANCEL, job_id, {"finished_at": at(1), "updated_at": at(1)})
    )
    assert cancelled is not None and cancelled.status == "cancelled"
    assert cancelled.updated_at == at(1)
    assert events_of(db, job_id) == [(None, "pending"), ("pending", "cancelled")]


def test_a_transition_checks_the_worker_and_its_lease(db: Database) -> None:
    (job_id,) = insert(db, job())
    claim(db, worker="w1")  # lease until at(60)

    def complete(worker: str, live_at: datetime) -> Any:
        values = {"result": None, "finished_at": live_at, "updated_at": live_at}
        return db.write_sync(
            lambda tx: jobs_sql.apply(tx, COMPLETE, job_id, values, worker=worker, at=live_at)
        )

    assert complete("w2", at(1)) is None  # another worker
    assert complete("w1", at(60)) is None  # the lease ended
    row = db.read_sync(jobs_sql.get, job_id)
    assert row is not None and row.status == "running"
    done = complete("w1", at(59))
    assert done is not None and done.status == "completed"
    assert done.lease_expires_at is None
    assert events_of(db, job_id)[-1] == ("running", "completed")


def test_a_transition_from_several_statuses_records_the_one_replaced(db: Database) -> None:
    pending, running, done = insert(db, job(), job(), job(status="completed"))
    claim(db, worker="w1", limit=1)  # the oldest: `pending` stays pending
    running, pending = pending, running
    values = {"finished_at": at(1), "updated_at": at(1)}
    for job_id in (pending, running):
        row = db.write_sync(lambda tx, j=job_id: jobs_sql.apply(tx, CANCEL, j, values))
        assert row is not None and row.status == "cancelled"
    assert events_of(db, pending)[-1] == ("pending", "cancelled")
    assert events_of(db, running)[-1] == ("running", "cancelled")
    refused = db.write_sync(lambda tx: jobs_sql.apply(tx, CANCEL, done, values))
    assert refused is None
    assert events_of(db, done) == [(None, "completed")]


def test_a_transition_without_a_status_change_records_no_event(db: Database) -> None:
    (job_id,) = insert(db, job())
    claim(db)
    row = db.write_sync(
        lambda tx: jobs_sql.apply(
            tx,
            HEARTBEAT,
            job_id,
            {"lease_expires_at": at(600), "updated_at": T0},
            worker="w1",
            at=T0,
        )
    )
    assert row is not None and row.lease_expires_at == at(600)
    assert events_of(db, job_id) == [(None, "pending"), ("pending", "running")]


def test_a_transition_refuses_values_other_than_its_columns(db: Database) -> None:
    (job_id,) = insert(db, job())
    with pytest.raises(ValueError, match="cancel sets"):
        db.write_sync(lambda tx: jobs_sql.apply(tx, CANCEL, job_id, {"updated_at": T0}))


def test_expired_leases_lists_only_running_jobs_past_their_lease(db: Database) -> None:
    a, b, c, _pending = insert(db, job(type="email"), job(type="pdf"), job(type="sync"), job())
    claim(
        db,
        types=("email", "pdf", "sync"),
        limit=3,
        lease={"email": at(30), "pdf": at(10), "sync": at(100)},
    )
    assert db.read_sync(jobs_sql.expired_leases, at(10), 10) == []  # strictly before now
    expired = db.read_sync(jobs_sql.expired_leases, at(31), 10)
    assert [r.id for r in expired] == [b, a]  # soonest expired first
    assert [r.id for r in db.read_sync(jobs_sql.expired_leases, at(31), 1)] == [b]
    assert {r.id for r in db.read_sync(jobs_sql.expired_leases, at(101), 10)} == {a, b, c}


def test_the_rescue_scan_reads_the_partial_lease_index(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan every claim runs first reads ix_jobs_lease from the oldest lease on: not
    every running job (SQLite's planner, left alone, reads them all by ix_jobs_finished and
    sorts them)."""
    insert(db, *(job(type=("email", "pdf")[i % 2]) for i in range(300)))
    claim(db, types=("email", "pdf"), limit=100)
    insert(db, *(job(status="completed", finished_at=at(-i)) for i in range(100)))
    sent = Captured(db, monkeypatch)
    assert len(db.read_sync(jobs_sql.expired_leases, at(61), 10)) == 10
    statement, params = sent.last("lease_expires_at <")
    if db.dialect == "sqlite":
        plan = [d for _, d in sqlite_plan(db, statement, params)]
        assert plan == ["SEARCH jobs USING INDEX ix_jobs_lease (lease_expires_at<?)"], plan
    else:
        nodes = [n for n, _ in pg_nodes(pg_generic_plan(db, statement, params))]
        scans = [(n["Node Type"], n.get("Index Name")) for n in nodes if "Relation Name" in n]
        assert scans == [("Index Scan", "ix_jobs_lease")], scans
        assert not any(n["Node Type"] == "Sort" for n in nodes), nodes
