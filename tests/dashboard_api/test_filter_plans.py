"""The dashboard's filters read an index, not the table, on both backends (EXPLAIN of the
statement `storage.jobs.page` sends; on PostgreSQL with sequential scans priced out, since a
table this small would otherwise always be read whole), and JSON containment agrees with
jsonb `@>` on both."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
import sqlalchemy as sa

from queuelog.runtime import Services
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database
from queuelog.storage.filters import JobFilter, json_contains
from queuelog.storage.scope import EVERYTHING
from queuelog.storage.tables import jobs
from tests.storage.rows import at, insert, job


def _plan(db: Database, match: JobFilter, status: str | None = None) -> str:
    sent: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cur: Any, statement: str, params: Any, *_: Any) -> None:
        sent.append((statement, params))

    sa.event.listen(db.reader, "before_cursor_execute", capture)
    try:
        db.read_sync(
            jobs_sql.page,
            scope=EVERYTHING,
            status=status,
            job_type=None,
            first=50,
            before_id=None,
            count=False,
            match=match,
        )
    finally:
        sa.event.remove(db.reader, "before_cursor_execute", capture)
    statement, params = next(s for s in sent if "FROM jobs" in s[0])
    with db.reader.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("SET enable_seqscan = off")
            rows = conn.exec_driver_sql("EXPLAIN " + statement, params).all()
            conn.rollback()
        else:
            rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params).all()
    return "\n".join(str(r[-1]) for r in rows)


@pytest.fixture
def seeded(services: Services) -> Database:
    """A database with 40 jobs of two types, three producers, two statuses."""
    rows = [
        job(
            type="email" if i % 2 else "pdf",
            producer=f"p{i % 3}",
            status="failed" if i % 4 == 0 else "pending",
            idempotency_key=f"k{i}" if i % 5 == 0 else None,
            created_at=at(i),
            payload=orjson.dumps({"n": i}).decode(),
        )
        for i in range(40)
    ]
    insert(services.db, *rows)
    return services.db


@pytest.mark.parametrize(
    ("match", "index"),
    [
        (JobFilter(ids=(3, 5)), {"jobs_pkey", "INTEGER PRIMARY KEY"}),
        (JobFilter(producer="p1"), {"ix_jobs_producer"}),
        (JobFilter(worker_id="w1"), {"ix_jobs_worker"}),
        (JobFilter(idempotency_key="k5"), {"ix_jobs_idempotency_key"}),
        (JobFilter(created_after=at(5), created_before=at(9)), {"ix_jobs_created"}),
        (JobFilter(statuses=("failed",), types=("pdf",)), {"ix_jobs_status_type"}),
        (
            JobFilter(statuses=("pending",), types=("pdf",)),
            {"ix_jobs_claim", "ix_jobs_status_type"},
        ),
    ],
)
def test_filters_read_an_index(seeded: Database, match: JobFilter, index: set[str]) -> None:
    plan = _plan(seeded, match)
    assert any(name in plan for name in index), plan


def test_a_past_creation_window_is_read_through_its_index_and_sorted(seeded: Database) -> None:
    """A window that ended longer ago than it lasted: its rows, from ix_jobs_created, sorted
    by id; not the primary key walked back from the newest job to the window."""
    plan = _plan(seeded, JobFilter(created_after=at(5), created_before=at(9)))
    assert "ix_jobs_created" in plan, plan
    if seeded.reader.dialect.name == "postgresql":
        assert "Sort" in plan and "Backward using jobs_pkey" not in plan, plan
    else:
        assert "USE TEMP B-TREE FOR ORDER BY" in plan, plan


def test_a_recent_creation_window_keeps_the_id_order() -> None:
    now = datetime.now(UTC)
    recent = JobFilter(created_after=now - timedelta(hours=2), created_before=now)
    assert recent.id_order().compare(jobs.c.id)
    since = JobFilter(created_after=now - timedelta(hours=1))
    assert since.id_order().compare(jobs.c.id)
    hour = timedelta(hours=1)
    past = JobFilter(created_after=now - 3 * hour, created_before=now - 2 * hour)
    assert not past.id_order().compare(jobs.c.id)


def test_containment_reads_the_gin_index_on_postgresql(seeded: Database) -> None:
    """jsonb `@>` on the payload column is served by ix_jobs_payload; SQLite has no JSON
    index and compares the payloads the other conditions leave."""
    plan = _plan(seeded, JobFilter(payload_contains='{"n": 12}'))
    if seeded.reader.dialect.name == "postgresql":
        assert "ix_jobs_payload" in plan, plan
    else:
        assert "queuelog_json_contains" not in plan and "SCAN jobs" in plan, plan


def test_containment_agrees_on_both_backends(seeded: Database) -> None:
    found = seeded.read_sync(
        jobs_sql.page,
        scope=EVERYTHING,
        status=None,
        job_type=None,
        first=100,
        before_id=None,
        count=True,
        match=JobFilter(payload_contains='{"n": 12}'),
    )
    rows, more, total = found
    assert [orjson.loads(r.payload) for r in rows] == [{"n": 12}]
    assert (more, total) == (False, 1)


CONTAINMENT = [
    ({"a": 1, "b": {"c": [1, 2, {"d": True}]}}, {"b": {"c": [{"d": True}, 2]}}, True),
    ({"a": 1}, {"a": 1.0}, True),
    ({"a": True}, {"a": 1}, False),
    ({"a": 0}, {"a": False}, False),
    ({"a": None}, {"a": None}, True),
    ({}, {"a": None}, False),
    ({"a": [1, 2]}, {"a": 1}, False),
    ({"a": [[1, 2]]}, {"a": [[1]]}, True),
    ({"a": "1"}, {"a": 1}, False),
    ({"a": {"b": 1}}, {"a": {}}, True),
    ({"a": 1}, {"a": [1]}, False),
]


def test_the_list_finds_what_containment_reads(db: Database) -> None:
    """Every filter of the table above against every payload there (and a few more), through
    the list: the jobs found are those `json_contains` reads as containing it (on SQLite
    past its json_extract pre-test, on PostgreSQL by jsonb's `@>`)."""
    values = [v for v, _, _ in CONTAINMENT] + [{"a": 1, "b": 2}, {"a.b": 1}, {"a": "x\u00e9"}]
    wanted = [w for _, w, _ in CONTAINMENT] + [{"a.b": 1}, {"a": "x\u00e9"}, {"b": 2, "a": 1.0}]
    ids = insert(db, *(job(payload=orjson.dumps(v).decode()) for v in values))
    for w in wanted:
        rows, _, _ = db.read_sync(
            jobs_sql.page,
            scope=EVERYTHING,
            status=None,
            job_type=None,
            first=100,
            before_id=None,
            count=False,
            match=JobFilter(payload_contains=orjson.dumps(w).decode()),
        )
        expected = [i for i, v in zip(ids, values, strict=True) if json_contains(v, w)]
        assert sorted(r.id for r in rows) == expected, w


def test_json_contains_reads_as_jsonb(services: Services) -> None:
    """The Python reading SQLite uses, case by case; on PostgreSQL, jsonb agrees."""
    with services.db.reader.connect() as conn:
        for value, wanted, expected in CONTAINMENT:
            assert json_contains(value, wanted) is expected, (value, wanted)
            if conn.dialect.name == "postgresql":
                stmt = "SELECT CAST(%(v)s AS jsonb) @> CAST(%(w)s AS jsonb)"
                params = {"v": orjson.dumps(value).decode(), "w": orjson.dumps(wanted).decode()}
                assert conn.exec_driver_sql(stmt, params).scalar_one() is expected, (value, wanted)


def test_a_past_creation_window_pages_newest_first(seeded: Database) -> None:
    """Sorted on the first page, walked back from the cursor on the next: the same order."""
    window = JobFilter(created_after=at(5), created_before=at(30))
    expected = [r.id for r in _all(seeded) if at(5) < r.created_at < at(30)]
    seen: list[int] = []
    before = None
    while True:
        rows, more, _ = seeded.read_sync(
            jobs_sql.page,
            scope=EVERYTHING,
            status=None,
            job_type=None,
            first=10,
            before_id=before,
            count=False,
            match=window,
        )
        seen += [r.id for r in rows]
        if not more:
            break
        before = rows[-1].id
    assert seen == expected and len(seen) == 24


def _all(db: Database) -> list[Any]:
    rows, _, _ = db.read_sync(
        jobs_sql.page,
        scope=EVERYTHING,
        status=None,
        job_type=None,
        first=100,
        before_id=None,
        count=False,
    )
    return rows
