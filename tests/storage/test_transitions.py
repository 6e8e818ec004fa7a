"""Storage conformance: every transition of the state machine, driven from its table in
`queuelog.domain.lifecycle`, so that the table and what storage does cannot drift apart. For each
compare-and-set transition and each status a job may be in: applied from the transition's
sources only, setting exactly its columns (and clearing its cleared ones), passing its
guard, and recording its event."""

from __future__ import annotations

import ast
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import queuelog
from queuelog.domain.lifecycle import (
    CLAIM,
    COMPARE_AND_SET,
    ENQUEUE,
    TRANSITIONS,
    Guard,
    Status,
    Transition,
)
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database
from tests.storage.rows import T0, at, claim, events_of, insert, job

LEASE_ENDS = at(60)
# A value for every column a transition may set, unlike any a seeded job holds.
GIVEN: dict[str, Any] = {
    "retry_count": 2,
    "error": "boom",
    "result": '{"ok": true}',
    "run_at": at(7),
    "worker_id": "w9",
    "claimed_at": at(5),
    "lease_expires_at": at(90),
    "finished_at": at(5),
    "updated_at": at(5),
    "progress": '{"done": 1}',
    "progress_at": at(5),
}


def _seeded(db: Database, status: Status) -> int:
    """A job in `status`, held by w1 under a lease that ends at LEASE_ENDS, with a value in
    every column a transition may clear."""
    (job_id,) = insert(
        db,
        job(
            status=status.value,
            worker_id="w1",
            claimed_at=T0,
            lease_expires_at=LEASE_ENDS,
            finished_at=T0,
            error="before",
        ),
    )
    return job_id


def _apply(db: Database, t: Transition, job_id: int, worker: str, when: datetime) -> Any:
    values = {c: GIVEN[c] for c in t.sets}
    return db.write_sync(lambda tx: jobs_sql.apply(tx, t, job_id, values, worker=worker, at=when))


def _passing(t: Transition) -> tuple[str, datetime]:
    """A caller and an instant that pass the transition's guard on a seeded job."""
    return "w1", (at(61) if t.guard is Guard.EXPIRED_LEASE else T0)


def test_the_table_names_every_transition_once_and_each_column_once() -> None:
    names = [t.name for t in TRANSITIONS]
    assert len(set(names)) == len(names)
    for t in TRANSITIONS:
        assert not t.sets & t.clears, t.name
        assert "status" not in t.sets | t.clears, t.name  # the target says it
        assert set(t.sets | t.clears) <= {c.name for c in jobs_sql.jobs.c} - {"id"}, t.name
    assert {t.name for t in COMPARE_AND_SET} == set(names) - {ENQUEUE.name, CLAIM.name}


@pytest.mark.parametrize("t", COMPARE_AND_SET, ids=lambda t: t.name)
@pytest.mark.parametrize("status", Status, ids=lambda s: s.value)
def test_a_transition_applies_from_its_sources_only(
    db: Database, t: Transition, status: Status
) -> None:
    job_id = _seeded(db, status)
    before = db.read_sync(jobs_sql.get, job_id)
    assert before is not None
    row = _apply(db, t, job_id, *_passing(t))
    if status not in t.sources:
        assert row is None
        assert db.read_sync(jobs_sql.get, job_id) == before  # nothing changed
        assert events_of(db, job_id) == [(None, status.value)]
        return
    assert row is not None and row == db.read_sync(jobs_sql.get, job_id)
    assert row.status == t.target.value
    for column in (c.name for c in jobs_sql.jobs.c):
        if column in t.sets:
            assert getattr(row, column) == GIVEN[column], column
        elif column in t.clears:
            assert getattr(row, column) is None, column
        elif column != "status":
            assert getattr(row, column) == getattr(before, column), column  # untouched
    event = [(status.value, t.target.value)] if t.records_event else []
    assert events_of(db, job_id) == [(None, status.value), *event]


@pytest.mark.parametrize(
    "t", [t for t in COMPARE_AND_SET if t.guard is not Guard.NONE], ids=lambda t: t.name
)
def test_a_guarded_transition_refuses_a_caller_its_guard_refuses(
    db: Database, t: Transition
) -> None:
    job_id = _seeded(db, t.sources[0])
    if t.guard is Guard.LIVE_LEASE:
        refused = [("w2", T0), ("w1", LEASE_ENDS), ("w1", at(61))]  # another; lease ended
    else:
        refused = [("w1", LEASE_ENDS), ("w1", T0)]  # not yet expired
    for worker, when in refused:
        assert _apply(db, t, job_id, worker, when) is None, (worker, when)
    assert _apply(db, t, job_id, *_passing(t)) is not None


def test_enqueue_creates_a_job_in_its_target_with_its_columns(db: Database) -> None:
    values = job(concurrency_key=None)
    del values["status"], values["finished_at"]
    assert set(values) == ENQUEUE.sets
    (row,) = db.write_sync(jobs_sql.insert, [{**values, "status": ENQUEUE.target.value}])
    assert row.status == ENQUEUE.target.value
    assert events_of(db, row.id) == [(None, ENQUEUE.target.value)]


def test_a_claim_takes_jobs_from_its_sources_only_setting_its_columns(db: Database) -> None:
    ids = {status: _seeded(db, status) for status in Status}
    claimed = claim(db, types=("email",), worker="w9", limit=10, now=at(1), lease={"email": at(99)})
    assert [r.id for r in claimed] == [ids[s] for s in CLAIM.sources]
    (row,) = claimed
    given = {"worker_id": "w9", "claimed_at": at(1), "lease_expires_at": at(99)}
    assert {c: getattr(row, c) for c in CLAIM.sets} == {**given, "updated_at": at(1)}
    assert row.status == CLAIM.target.value
    (source,) = CLAIM.sources
    assert events_of(db, row.id)[-1] == (source.value, CLAIM.target.value)


def test_each_status_is_spelled_once_in_the_package() -> None:
    """The statuses are the enum's values: no other module of the package spells one (the
    migrations, frozen history, aside)."""
    root = Path(queuelog.__file__).parent
    spelled = {s.value for s in Status}
    # The client side (client/, worker/, cli/remote.py) is the API's caller, not the server:
    # it speaks the API's statuses and imports none of the server's modules.
    client_side = ("client", "worker")
    found = []
    for path in root.rglob("*.py"):
        if (
            "migrations" in path.parts
            or path.name == "lifecycle.py"
            or path.relative_to(root) == Path("cli/remote.py")
        ):
            continue
        if path.relative_to(root).parts[0] in client_side:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in spelled:
                found.append((str(path.relative_to(root)), node.lineno, node.value))
    allowed = {("api/extension.py", "completed")}  # a GraphQL result key, not a status
    # The REST labels: a Literal for the OpenAPI document, held to the enum by an assert there.
    allowed |= {("edge/rest_models.py", status) for status in spelled}
    assert [f for f in found if (f[0], f[2]) not in allowed] == []
