"""One conformance suite for the storage layer, run on SQLite and on PostgreSQL alike.

Every test drives `queuelog.storage` directly through `Database.write_sync` / `read_sync`,
so that a backend that differs from the other fails here before it fails in the service.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from alembic.config import Config
from alembic.script import ScriptDirectory

from queuelog.services import Services
from queuelog.storage import driver
from queuelog.storage import events as events_sql
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database, Tx, normalize_url
from queuelog.storage.migrate import SCRIPTS, migrate
from queuelog.storage.tables import job_events, jobs, metadata
from tests.support import database_url

T0 = datetime(2026, 1, 1, tzinfo=UTC)
J = jobs.c


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def job(**kw: Any) -> dict[str, Any]:
    """The values of a pending `jobs` row; keyword arguments override them."""
    values: dict[str, Any] = {
        "type": "email",
        "payload": "{}",
        "priority": 0,
        "status": "pending",
        "retry_count": 0,
        "max_retries": 3,
        "idempotency_key": None,
        "request_hash": None,
        "producer": "p1",
        "run_at": T0,
        "created_at": T0,
        "updated_at": T0,
        "finished_at": None,
    }
    values.update(kw)
    return values


@pytest.fixture
def db(services: Services) -> Database:
    return services.db


def insert(db: Database, *rows: dict[str, Any]) -> list[int]:
    return [r.id for r in db.write_sync(jobs_sql.insert, list(rows))]


def claim(
    db: Database,
    *,
    types: tuple[str, ...] = ("email", "pdf", "sync"),
    limit: int = 100,
    now: datetime = T0,
    worker: str = "w1",
    lease: dict[str, datetime] | None = None,
) -> list[Any]:
    until = lease or {t: now + timedelta(seconds=60) for t in types}
    return db.write_sync(
        lambda tx: jobs_sql.claim(
            tx, worker=worker, now=now, types=types, limit=limit, lease_until=until
        )
    )


def table_counts(db: Database) -> tuple[int, int]:
    def count(tx: Tx) -> tuple[int, int]:
        n_jobs = tx.conn.execute(sa.select(sa.func.count()).select_from(jobs)).scalar_one()
        n_events = tx.conn.execute(sa.select(sa.func.count()).select_from(job_events)).scalar_one()
        return int(n_jobs), int(n_events)

    return db.read_sync(count)


def events_of(db: Database, job_id: int) -> list[tuple[str | None, str]]:
    rows = db.read_sync(events_sql.for_job, job_id, 100)
    return [(e.previous_status, e.status) for e in rows]


# -- insert and get -------------------------------------------------------------------------


def test_insert_returns_rows_in_order_and_records_creation(db: Database) -> None:
    rows = db.write_sync(
        jobs_sql.insert, [job(type="email"), job(type="pdf", priority=30), job(type="sync")]
    )
    assert [r.type for r in rows] == ["email", "pdf", "sync"]
    assert rows[0].id < rows[1].id < rows[2].id
    got = db.read_sync(jobs_sql.get, rows[1].id)
    assert got is not None
    assert (got.type, got.priority, got.status, got.run_at) == ("pdf", 30, "pending", T0)
    assert got.run_at.tzinfo is not None  # aware UTC datetimes out, on every dialect
    for r in rows:
        assert events_of(db, r.id) == [(None, "pending")]
    assert db.read_sync(jobs_sql.get, rows[2].id + 1000) is None


def test_insert_idempotent_returns_the_producers_existing_job(db: Database) -> None:
    first, created = db.write_sync(
        jobs_sql.insert_idempotent, job(idempotency_key="k1", request_hash="h1")
    )
    assert created is True
    again, created = db.write_sync(
        jobs_sql.insert_idempotent, job(idempotency_key="k1", request_hash="h2", priority=20)
    )
    assert created is False
    assert again.id == first.id and again.request_hash == "h1" and again.priority == 0
    assert table_counts(db) == (1, 1)  # no second row, no second creation event

    other, created = db.write_sync(
        jobs_sql.insert_idempotent, job(idempotency_key="k1", request_hash="h1", producer="p2")
    )
    assert created is True and other.id != first.id  # keys are scoped per producer
    found = db.read_sync(jobs_sql.by_key, "p2", "k1")
    assert found is not None and found.id == other.id
    assert db.read_sync(jobs_sql.by_key, "p3", "k1") is None


# -- claim ------------------------------------------------------------------------------------


def test_claim_order_is_priority_then_run_at_then_id(db: Database) -> None:
    ids = insert(
        db,
        job(priority=0, run_at=at(-50)),  # 0: low, oldest
        job(priority=20, run_at=at(-10)),  # 1: high, newer
        job(priority=20, run_at=at(-30)),  # 2: high, older
        job(priority=30, run_at=at(-1)),  # 3: critical
        job(priority=20, run_at=at(-30)),  # 4: high, same run_at as 2, higher id
        job(priority=10, run_at=at(-40)),  # 5: medium
        job(priority=30, run_at=at(10)),  # 6: critical but not due yet
    )
    claimed = claim(db, limit=100)
    assert [r.id for r in claimed] == [ids[i] for i in (3, 2, 4, 1, 5, 0)]
    assert all(r.status == "running" and r.worker_id == "w1" for r in claimed)
    assert all(r.claimed_at == T0 and r.lease_expires_at == at(60) for r in claimed)
    future = db.read_sync(jobs_sql.get, ids[6])
    assert future is not None and future.status == "pending" and future.worker_id is None
    # Once due, it is claimable.
    assert [r.id for r in claim(db, now=at(10))] == [ids[6]]
    assert claim(db, now=at(1000)) == []


def test_claim_one_at_a_time_follows_the_same_order(db: Database) -> None:
    ids = insert(db, job(priority=10), job(priority=30), job(priority=10), job(priority=0))
    order = [claim(db, limit=1)[0].id for _ in ids]
    assert order == [ids[1], ids[0], ids[2], ids[3]]


def test_claim_filters_types_and_respects_limit(db: Database) -> None:
    ids = insert(db, *(job(type="pdf") for _ in range(3)), *(job(type="email") for _ in range(3)))
    got = claim(db, types=("email",), limit=2)
    assert [r.id for r in got] == ids[3:5]
    assert {r.type for r in got} == {"email"}
    assert [r.id for r in claim(db, types=("sync",))] == []
    assert [r.id for r in claim(db, types=("pdf", "email"), limit=10)] == [*ids[:3], ids[5]]


def test_claim_gives_each_type_its_own_lease(db: Database) -> None:
    insert(db, job(type="email"), job(type="pdf"), job(type="sync"))
    lease = {"email": at(60), "pdf": at(900), "sync": at(5)}
    got = claim(db, types=("email", "pdf", "sync"), lease=lease)
    assert {r.type: r.lease_expires_at for r in got} == lease


def test_claim_records_pending_to_running(db: Database) -> None:
    (job_id,) = insert(db, job())
    claim(db)
    assert events_of(db, job_id) == [(None, "pending"), ("pending", "running")]
    (event,) = db.read_sync(events_sql.after, 0, 10, statuses=["running"])
    assert (event.job_id, event.worker_id, event.occurred_at) == (job_id, "w1", T0)


def test_claim_takes_the_first_due_jobs_across_the_types_asked(db: Database) -> None:
    """Each type's jobs are read apart and then merged: across the types asked the order is
    still priority, then run_at, then id; the limit counts across them; jobs not yet due
    wait; the jobs of a type not asked, all ahead in that order, stay pending."""
    backlog = insert(db, *(job(type="pdf", priority=30, run_at=at(-100 - i)) for i in range(500)))
    mine = insert(
        db,
        job(type="email", priority=10, run_at=at(-5)),  # 0
        job(type="sync", priority=10, run_at=at(-5)),  # 1: as 0, a higher id
        job(type="sync", priority=20, run_at=at(-1)),  # 2
        job(type="email", priority=30, run_at=at(5)),  # 3: first once due
        job(type="email", priority=0, run_at=at(-50)),  # 4
        job(type="sync", priority=10, run_at=at(-6)),  # 5: older than 0 and 1
        job(type="email", priority=20, run_at=at(-1)),  # 6: as 2, a higher id
    )
    got = claim(db, types=("email", "sync"), limit=4)  # two of each type
    assert [r.id for r in got] == [mine[i] for i in (2, 6, 5, 0)]
    assert all(r.status == "running" for r in got)
    # A type asked for twice is read once: both remaining due jobs, not one of them twice.
    got = claim(db, types=("sync", "sync", "email"), limit=2)
    assert [r.id for r in got] == [mine[1], mine[4]]
    assert claim(db, types=("email", "sync")) == []
    assert [r.id for r in claim(db, types=("sync", "email"), now=at(5))] == [mine[3]]
    left = db.read_sync(lambda tx: jobs_sql.counts(tx, producer=None, worker=None, job_type="pdf"))
    assert left["pending"] == len(backlog)
    assert [r.id for r in claim(db, types=("pdf",), limit=2)] == backlog[:-3:-1]  # oldest


def test_claim_may_ask_for_many_types_at_once(db: Database) -> None:
    """More types than SQLite takes terms in one compound SELECT (500)."""
    ids = insert(db, job(type="t599", priority=10), job(type="t7"), job(type="email", priority=20))
    many = tuple(f"t{i}" for i in range(600))
    assert [r.id for r in claim(db, types=many, limit=5)] == [ids[0], ids[1]]
    assert [r.id for r in claim(db, types=(*many, "email"))] == [ids[2]]


def test_workers_claiming_several_types_at_once_never_share_a_job(db: Database) -> None:
    """Six workers on two Databases (as on two servers) claim three types at once, several
    jobs a claim: the database settles every race, and each job is claimed once."""
    kinds = ("email", "pdf", "sync")
    ids = set(insert(db, *(job(type=kinds[i % 3], priority=i % 4 * 10) for i in range(600))))
    other = Database(db.url.render_as_string(hide_password=False))

    def drain(n: int) -> list[int]:
        held: list[int] = []
        while got := claim((db, other)[n % 2], types=kinds, limit=3, worker=f"w{n}"):
            held += [r.id for r in got]
        return held

    try:
        with ThreadPoolExecutor(6) as pool:
            held = list(pool.map(drain, range(6)))
    finally:
        other.close()
    claimed = [job_id for mine in held for job_id in mine]
    assert sorted(claimed) == sorted(ids)  # each job exactly once
    assert sum(1 for mine in held if mine) > 1

    def claims(tx: Tx) -> list[int]:
        E = job_events.c
        stmt = sa.select(sa.func.count()).where(E.status == "running").group_by(E.job_id)
        return list(tx.conn.execute(stmt).scalars())

    assert sorted(set(db.read_sync(claims))) == [1]


ONE_OR_SEVERAL = pytest.mark.parametrize(
    "types", [("email",), ("email", "sync")], ids=["one type", "several types"]
)


@ONE_OR_SEVERAL
def test_a_claim_does_not_read_the_backlog_of_other_types(
    db: Database, monkeypatch: pytest.MonkeyPatch, types: tuple[str, ...]
) -> None:
    """A worker for one type pays nothing for another type's backlog. Work, not time, is
    measured: SQLite's virtual-machine steps, PostgreSQL's rows read (the old plan walked
    every pending job of other types that sorted ahead of the first one of its own)."""
    backlog = 2_000
    insert(db, *(job(type="pdf", priority=30, run_at=at(-i - 1)) for i in range(backlog)))
    first, second = insert(db, job(type="email"), job(type="email"))
    if db.dialect == "sqlite":

        def counted(tx: Tx) -> tuple[list[Any], int]:
            raw = tx.conn.connection.driver_connection
            assert raw is not None
            steps = 0

            def step() -> int:
                nonlocal steps
                steps += 1
                return 0

            raw.set_progress_handler(step, 1)  # type: ignore[attr-defined]
            try:
                until = dict.fromkeys(types, at(60))
                rows = jobs_sql.claim(
                    tx, worker="w1", now=T0, types=types, limit=1, lease_until=until
                )
            finally:
                raw.set_progress_handler(None, 1)  # type: ignore[attr-defined]
            return rows, steps

        rows, steps = db.write_sync(counted)
        assert [r.id for r in rows] == [first]
        assert steps < backlog / 4, steps
        return
    sent = Captured(db, monkeypatch)
    assert [r.id for r in claim(db, types=types, limit=1)] == [first]
    statement, params = sent.last("UPDATE jobs")
    plan = _pg_generic_plan(db, statement, params, analyze=True)  # claims `second`
    read = sum(
        n["Actual Rows"] * n["Actual Loops"] + n.get("Rows Removed by Filter", 0)
        for n, _ in _pg_nodes(plan)
        if n.get("Relation Name") == "jobs" and n["Node Type"] != "ModifyTable"
    )
    assert 1 <= read < 10, plan
    row = db.read_sync(jobs_sql.get, second)
    assert row is not None and row.status == "pending"  # EXPLAIN ANALYZE was rolled back


class Captured:
    """The statements `storage.driver` sends, with their parameters bound as it binds them."""

    def __init__(self, db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[tuple[str, list[Any]]] = []
        execute = driver.execute

        def capture(tx: Any, text: str, params: Any) -> Any:
            params = list(params)
            self.sent.append((text, [driver.bind(db.dialect, p) for p in params]))
            return execute(tx, text, params)

        monkeypatch.setattr(driver, "execute", capture)

    def last(self, contains: str) -> tuple[str, list[Any]]:
        return next(s for s in reversed(self.sent) if contains in s[0])


def _sqlite_plan(db: Database, statement: str, params: list[Any]) -> list[tuple[int, str]]:
    """EXPLAIN QUERY PLAN: (parent, detail) for each step."""
    with db.reader.connect() as conn:
        rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, tuple(params)).all()
    return [(int(r[1]), str(r[3])) for r in rows]


def _pg_nodes(
    node: dict[str, Any], above: tuple[dict[str, Any], ...] = ()
) -> Iterator[tuple[dict[str, Any], tuple[dict[str, Any], ...]]]:
    """Every node of a JSON plan, with the nodes above it (outermost first)."""
    yield node, above
    for child in node.get("Plans", ()):
        yield from _pg_nodes(child, (*above, node))


def _until_limit(above: tuple[dict[str, Any], ...]) -> list[str]:
    """The node types between a node and the nearest Limit above it (which must exist)."""
    types = [n["Node Type"] for n in reversed(above)]
    assert "Limit" in types, types
    return types[: types.index("Limit")]


@ONE_OR_SEVERAL
def test_claim_reads_one_range_of_the_claim_index_per_type(
    db: Database, monkeypatch: pytest.MonkeyPatch, types: tuple[str, ...]
) -> None:
    """The claim statement, as the server runs it, reads ix_jobs_claim by type: one range
    per type, each already in claim order (no sort of a type's pending jobs: a full sort
    per claim is 300x slower at 100k pending), and no scan of the other types' jobs."""
    insert(db, *(job(type=("email", "pdf")[i % 2], priority=(i % 4) * 10) for i in range(300)))
    sent = Captured(db, monkeypatch)
    assert len(claim(db, types=types, limit=1)) == 1
    statement, params = sent.last("UPDATE jobs")
    if db.dialect == "sqlite":
        plan = _sqlite_plan(db, statement, params)
        ranges = [
            p for p, d in plan if d.startswith("SEARCH jobs USING INDEX ix_jobs_claim (type=?")
        ]
        assert ranges, plan
        for parent in ranges:  # the subquery that reads a type's range sorts nothing
            assert not any(p == parent and "TEMP B-TREE" in d for p, d in plan), plan
        scans = [d for _, d in plan if d.startswith("SCAN")]  # of no table: jobs are SEARCHed
        assert all("VIRTUAL TABLE" in d or d.startswith("SCAN (subquery") for d in scans), plan
    else:
        plan = _pg_generic_plan(db, statement, params)
        (pick,) = [n for n, _ in _pg_nodes(plan) if n.get("Parent Relationship") == "InitPlan"]
        nodes = list(_pg_nodes(pick))
        ranges = [(n, up) for n, up in nodes if n.get("Index Name") == "ix_jobs_claim"]
        assert ranges, plan
        for node, above in ranges:
            # type = the one asked (a parameter, or the LATERAL join's type): not = ANY(...)
            assert re.search(r"\(type\)::text = (\$\d|asked\.)", node.get("Index Cond", "")), node
            assert "Sort" not in _until_limit(above), plan
        scans = [n["Node Type"] for n, _ in nodes if n.get("Relation Name") == "jobs"]
        assert scans == ["Index Scan"], scans  # the pick reads nothing else of jobs


def _pg_generic_plan(
    db: Database, statement: str, params: list[Any], *, analyze: bool = False
) -> dict[str, Any]:
    """EXPLAIN (as JSON) the generic plan of `statement`: the plan a prepared statement
    (psycopg prepares a query it runs often) may settle on, made without knowing the
    parameters. With `analyze`, runs it too, in a transaction rolled back."""
    with db.reader.connect() as conn:
        raw = conn.connection.driver_connection
        assert isinstance(raw, psycopg.Connection)
        numbered = iter(range(1, len(params) + 1))
        prepared = re.sub(r"\?", lambda m: f"${next(numbered)}", statement)
        args = ", ".join(psycopg.ClientCursor(raw).mogrify("%s", [p]) for p in params)
        options = "ANALYZE, FORMAT JSON" if analyze else "FORMAT JSON"
        try:
            raw.execute("ANALYZE jobs")
            raw.execute("SET plan_cache_mode = force_generic_plan")
            raw.execute(f"PREPARE claim_plan AS {prepared}".encode())
            found = raw.execute(f"EXPLAIN ({options}) EXECUTE claim_plan({args})".encode())
            (explained,) = found.fetchone() or ()
        finally:
            raw.rollback()  # and with it the statement's writes, PREPARE and SET
    plan: dict[str, Any] = explained[0]["Plan"]
    return plan


# -- transitions ----------------------------------------------------------------------------


def test_transition_is_a_compare_and_set(db: Database) -> None:
    (job_id,) = insert(db, job())
    before = db.read_sync(jobs_sql.get, job_id)
    wrong = db.write_sync(
        lambda tx: jobs_sql.transition(tx, job_id, "running", {"status": "completed"})
    )
    assert wrong is None
    assert db.read_sync(jobs_sql.get, job_id) == before
    assert events_of(db, job_id) == [(None, "pending")]

    done = db.write_sync(
        lambda tx: jobs_sql.transition(
            tx, job_id, "pending", {"status": "cancelled", "updated_at": at(1)}
        )
    )
    assert done is not None and done.status == "cancelled" and done.updated_at == at(1)
    assert events_of(db, job_id) == [(None, "pending"), ("pending", "cancelled")]


def test_transition_checks_the_worker_and_its_lease(db: Database) -> None:
    (job_id,) = insert(db, job())
    claim(db, worker="w1")  # lease until at(60)

    def complete(worker: str, live_at: datetime) -> Any:
        return db.write_sync(
            lambda tx: jobs_sql.transition(
                tx,
                job_id,
                "running",
                {"status": "completed", "updated_at": live_at},
                worker=worker,
                lease_live_at=live_at,
            )
        )

    assert complete("w2", at(1)) is None  # another worker
    assert complete("w1", at(60)) is None  # the lease ended
    row = db.read_sync(jobs_sql.get, job_id)
    assert row is not None and row.status == "running"
    done = complete("w1", at(59))
    assert done is not None and done.status == "completed"
    assert events_of(db, job_id)[-1] == ("running", "completed")


def test_transition_from_several_statuses_records_the_one_replaced(db: Database) -> None:
    pending, running, done = insert(db, job(), job(), job(status="completed"))
    db.write_sync(lambda tx: jobs_sql.transition(tx, running, "pending", {"status": "running"}))
    for job_id in (pending, running):
        row = db.write_sync(
            lambda tx, j=job_id: jobs_sql.transition(
                tx, j, ("pending", "running"), {"status": "cancelled"}
            )
        )
        assert row is not None and row.status == "cancelled"
    assert events_of(db, pending)[-1] == ("pending", "cancelled")
    assert events_of(db, running)[-1] == ("running", "cancelled")
    refused = db.write_sync(
        lambda tx: jobs_sql.transition(tx, done, ("pending", "running"), {"status": "cancelled"})
    )
    assert refused is None
    assert events_of(db, done) == [(None, "completed")]


def test_transition_without_a_status_change_records_no_event(db: Database) -> None:
    (job_id,) = insert(db, job())
    claim(db)
    row = db.write_sync(
        lambda tx: jobs_sql.transition(
            tx, job_id, "running", {"lease_expires_at": at(600)}, worker="w1", lease_live_at=T0
        )
    )
    assert row is not None and row.lease_expires_at == at(600)
    assert events_of(db, job_id) == [(None, "pending"), ("pending", "running")]


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
        plan = [d for _, d in _sqlite_plan(db, statement, params)]
        assert plan == ["SEARCH jobs USING INDEX ix_jobs_lease (lease_expires_at<?)"], plan
    else:
        nodes = [n for n, _ in _pg_nodes(_pg_generic_plan(db, statement, params))]
        scans = [(n["Node Type"], n.get("Index Name")) for n in nodes if "Relation Name" in n]
        assert scans == [("Index Scan", "ix_jobs_lease")], scans
        assert not any(n["Node Type"] == "Sort" for n in nodes), nodes


# -- reads ------------------------------------------------------------------------------------


def test_page_is_newest_first_with_a_cursor_and_totals(db: Database) -> None:
    ids = insert(
        db,
        *(job(producer=("p1", "p2")[i % 2], type=("email", "pdf")[i % 3 == 0]) for i in range(7)),
    )

    def page(**kw: Any) -> tuple[list[int], bool, int]:
        args: dict[str, Any] = {
            "producer": None,
            "worker": None,
            "status": None,
            "job_type": None,
            "first": 3,
            "before_id": None,
        }
        args.update(kw)
        rows, more, total = db.read_sync(lambda tx: jobs_sql.page(tx, **args))
        return [r.id for r in rows], more, total

    assert page() == (ids[6:3:-1], True, 7)
    assert page(before_id=ids[4]) == (ids[3:0:-1], True, 7)
    assert page(before_id=ids[1]) == ([ids[0]], False, 7)
    p1 = [ids[i] for i in (6, 4, 2, 0)]
    assert page(producer="p1", first=10) == (p1, False, 4)
    assert page(producer="p1", job_type="pdf", first=10) == ([ids[6], ids[0]], False, 2)
    assert page(producer="nobody") == ([], False, 0)

    claim(db, worker="w9", limit=2)  # the two oldest
    assert page(worker="w9") == ([ids[1], ids[0]], False, 2)
    assert page(status="running", first=1) == ([ids[1]], True, 2)
    assert page(worker="w9", producer="p2") == ([ids[1]], False, 1)


def test_counts_by_status_respect_scope_and_type(db: Database) -> None:
    insert(
        db,
        job(producer="p1"),
        job(producer="p1", type="pdf"),
        job(producer="p2"),
        job(producer="p2", status="failed"),
    )
    claim(db, worker="w1", types=("pdf",))
    zero = dict.fromkeys(("pending", "running", "completed", "failed", "cancelled"), 0)

    def counts(**kw: Any) -> dict[str, int]:
        args: dict[str, Any] = {"producer": None, "worker": None, "job_type": None}
        args.update(kw)
        return db.read_sync(lambda tx: jobs_sql.counts(tx, **args))

    assert counts() == {**zero, "pending": 2, "running": 1, "failed": 1}
    assert counts(producer="p1") == {**zero, "pending": 1, "running": 1}
    assert counts(worker="w1") == {**zero, "running": 1}
    assert counts(job_type="email") == {**zero, "pending": 2, "failed": 1}
    assert counts(producer="nobody") == zero


# -- retention --------------------------------------------------------------------------------


def test_prune_deletes_only_jobs_finished_before_the_cutoff_with_their_events(
    db: Database,
) -> None:
    old_done, new_done, old_failed, pending = insert(
        db,
        job(status="completed", finished_at=at(-100)),
        job(status="completed", finished_at=at(100)),
        job(status="failed", finished_at=at(-100)),
        job(),
    )
    assert db.read_sync(jobs_sql.count_prunable, "completed", T0) == 1
    assert db.write_sync(jobs_sql.prune, "completed", T0, 100) == 1
    assert db.read_sync(jobs_sql.get, old_done) is None
    assert events_of(db, old_done) == []
    for kept in (new_done, old_failed, pending):
        assert db.read_sync(jobs_sql.get, kept) is not None
        assert events_of(db, kept) != []
    assert db.write_sync(jobs_sql.prune, "completed", T0, 100) == 0


def test_prune_works_in_batches(db: Database) -> None:
    insert(db, *(job(status="failed", finished_at=at(-i - 1)) for i in range(5)))
    assert db.write_sync(jobs_sql.prune, "failed", T0, 2) == 2
    assert db.write_sync(jobs_sql.prune, "failed", T0, 2) == 2
    assert db.write_sync(jobs_sql.prune, "failed", T0, 2) == 1
    assert table_counts(db) == (0, 0)


def test_ids_are_never_reused_after_the_newest_jobs_are_pruned(db: Database) -> None:
    (newest,) = insert(db, job(status="completed", finished_at=at(-100)))
    assert db.write_sync(jobs_sql.prune, "completed", T0, 100) == 1
    (after,) = insert(db, job())
    assert after > newest


class _RetryBeforeDelete:
    """A connection that, just before prune's DELETE, retries the job: the race in which
    an admin retries a failed job between prune's SELECT and its DELETE."""

    def __init__(self, conn: sa.Connection, job_id: int) -> None:
        self.conn, self.job_id = conn, job_id

    def execute(self, stmt: Any, *args: Any, **kw: Any) -> Any:
        if isinstance(stmt, sa.Delete) and stmt.table is jobs:
            self.conn.execute(
                jobs.update().where(J.id == self.job_id).values(status="pending", finished_at=None)
            )
        return self.conn.execute(stmt, *args, **kw)


def test_prune_keeps_a_job_retried_between_select_and_delete(db: Database) -> None:
    retried, gone = insert(
        db,
        job(status="failed", finished_at=at(-100)),
        job(status="failed", finished_at=at(-50)),
    )

    def racing_prune(tx: Tx) -> int:
        racy = Tx(_RetryBeforeDelete(tx.conn, retried), tx.dialect)  # type: ignore[arg-type]
        return jobs_sql.prune(racy, "failed", T0, 100)

    assert db.write_sync(racing_prune) == 1
    row = db.read_sync(jobs_sql.get, retried)
    assert row is not None and row.status == "pending"
    assert events_of(db, retried) == [(None, "failed")]
    assert db.read_sync(jobs_sql.get, gone) is None


# -- events -----------------------------------------------------------------------------------


def test_a_transaction_that_raises_leaves_neither_job_nor_event(db: Database) -> None:
    (kept,) = insert(db, job())

    def boom(tx: Tx) -> None:
        jobs_sql.insert(tx, [job(type="pdf")])
        jobs_sql.transition(tx, kept, "pending", {"status": "cancelled"})
        raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        db.write_sync(boom)
    assert table_counts(db) == (1, 1)
    row = db.read_sync(jobs_sql.get, kept)
    assert row is not None and row.status == "pending"


def test_events_are_appended_in_the_same_transaction(db: Database) -> None:
    """A reader that sees the job's new status sees its event too: both or neither."""

    def enqueue_and_peek(tx: Tx) -> int:
        rows = jobs_sql.insert(tx, [job()])
        # Not yet appended: they are written at the end of this same transaction.
        assert tx.events and tx.events[0].job_id == rows[0].id
        return int(rows[0].id)

    job_id = db.write_sync(enqueue_and_peek)
    assert events_of(db, job_id) == [(None, "pending")]


def test_events_for_job_after_and_head(db: Database) -> None:
    assert db.read_sync(events_sql.head) == 0
    assert db.read_sync(events_sql.oldest) == 0
    a, b = insert(db, job(type="email", producer="p1"), job(type="pdf", producer="p2"))
    claim(db, types=("pdf",))
    db.write_sync(
        lambda tx: jobs_sql.transition(tx, b, "running", {"status": "completed"}, worker="w1")
    )
    head = db.read_sync(events_sql.head)
    every = db.read_sync(events_sql.after, 0, 100)
    assert [(e.job_id, e.previous_status, e.status) for e in every] == [
        (a, None, "pending"),
        (b, None, "pending"),
        (b, "pending", "running"),
        (b, "running", "completed"),
    ]
    ids = [e.id for e in every]
    assert ids == sorted(ids) and head == ids[-1]
    assert db.read_sync(events_sql.oldest) == ids[0]
    assert [e.id for e in db.read_sync(events_sql.after, ids[1], 100)] == ids[2:]
    assert [e.id for e in db.read_sync(events_sql.after, 0, 2)] == ids[:2]
    assert [e.id for e in db.read_sync(events_sql.after, 0, 100, upto=ids[2])] == ids[:3]

    def after(**kw: Any) -> list[int]:
        return [e.id for e in db.read_sync(lambda tx: events_sql.after(tx, 0, 100, **kw))]

    assert after(job_id=a) == ids[:1]
    assert after(job_type="pdf") == ids[1:]
    assert after(producer="p2", statuses=["running", "completed"]) == ids[2:]
    assert after(statuses=["pending"]) == ids[:2]
    assert [e.id for e in db.read_sync(events_sql.for_job, b, 2)] == ids[1:3]
    assert db.read_sync(events_sql.after, head, 100) == []


# -- SQLite settings --------------------------------------------------------------------------

PRAGMAS = ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")


def _pragmas(engine: sa.Engine) -> dict[str, Any]:
    with engine.connect() as conn:
        return {p: conn.exec_driver_sql(f"PRAGMA {p}").scalar() for p in PRAGMAS}


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[Callable[..., Database]]:
    opened: list[Database] = []

    def open_db(**kw: Any) -> Database:
        db = Database(f"sqlite:///{tmp_path / f'p{len(opened)}.db'}", **kw)
        opened.append(db)
        return db

    yield open_db
    for db in opened:
        db.close()


def test_sqlite_pragmas_default_to_durable(sqlite_db: Callable[..., Database]) -> None:
    db = sqlite_db()
    expected = {"journal_mode": "wal", "synchronous": 2, "foreign_keys": 1, "busy_timeout": 5000}
    assert _pragmas(db.writer) == expected
    assert _pragmas(db.reader) == expected


def test_sqlite_synchronous_normal_only_when_configured(
    sqlite_db: Callable[..., Database],
) -> None:
    db = sqlite_db(sqlite_synchronous="NORMAL", busy_timeout_ms=750)
    for engine in (db.writer, db.reader):
        got = _pragmas(engine)
        assert (got["synchronous"], got["busy_timeout"], got["journal_mode"]) == (1, 750, "wal")


def test_deleting_a_job_cascades_to_its_events(db: Database) -> None:
    (job_id,) = insert(db, job(status="completed", finished_at=at(-1)))
    db.write_sync(lambda tx: tx.conn.execute(jobs.delete().where(J.id == job_id)))
    assert events_of(db, job_id) == []


# -- migrations -------------------------------------------------------------------------------


def _revision(db: Database) -> str | None:
    return db.read_sync(
        lambda tx: tx.conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    )


def _head() -> str | None:
    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPTS))
    return ScriptDirectory.from_config(cfg).get_current_head()


def test_migration_reaches_head_and_a_second_run_is_a_no_op(db: Database) -> None:
    head = _head()
    assert head is not None and _revision(db) == head
    (job_id,) = insert(db, job())
    tables = set(sa.inspect(db.writer).get_table_names())
    assert {"jobs", "job_events", "api_keys", "alembic_version"} <= tables

    migrate(db)
    migrate(db)
    assert _revision(db) == head
    assert set(sa.inspect(db.writer).get_table_names()) == tables
    assert db.read_sync(jobs_sql.get, job_id) is not None
    assert table_counts(db) == (1, 1)


def _index_sql(engine: sa.Engine) -> dict[str, str]:
    """Every index's definition, by name, as the database reports it."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            rows = conn.exec_driver_sql(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
            ).all()
        else:
            rows = conn.exec_driver_sql(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"
                " AND tablename <> 'alembic_version'"
            ).all()
    return {str(name): " ".join(str(sql).split()) for name, sql in rows}


def test_the_claim_index_is_by_type_and_partial_on_pending(db: Database) -> None:
    sql = _index_sql(db.writer)["ix_jobs_claim"]
    assert "(type, priority DESC, run_at, id)" in sql, sql
    assert "WHERE" in sql and "'pending'" in sql, sql


def test_the_migrations_and_the_model_make_the_same_indexes(
    db: Database, backend: str, tmp_path: Path
) -> None:
    """`metadata.create_all` (tables.py) and the migrations agree on every index."""
    with database_url(backend, tmp_path) as url:
        engine = sa.create_engine(normalize_url(url), poolclass=sa.NullPool)
        try:
            metadata.create_all(engine)
            model = _index_sql(engine)
        finally:
            engine.dispose()
    migrated = _index_sql(db.writer)
    assert "ix_jobs_claim" in model
    assert migrated == model


def test_upgrading_from_0002_keeps_pending_jobs_claimable(backend: str, tmp_path: Path) -> None:
    """0003 rebuilds ix_jobs_claim by type under a database that holds jobs already."""
    with database_url(backend, tmp_path) as url:
        db = Database(url)
        try:
            migrate(db, "0002")
            assert _revision(db) == "0002"
            assert "(priority DESC, run_at, id)" in _index_sql(db.writer)["ix_jobs_claim"]
            ids = insert(
                db,
                job(type="pdf", priority=30, run_at=at(-9)),
                job(type="email", priority=10, run_at=at(-1)),
                job(type="email", priority=10, run_at=at(-2)),
                job(type="email", priority=30, run_at=at(5)),
                job(type="email", status="completed", finished_at=at(-1)),
            )
            migrate(db)
            assert _revision(db) == _head()
            claim_index = _index_sql(db.writer)["ix_jobs_claim"]
            assert "(type, priority DESC, run_at, id)" in claim_index, claim_index
            assert [r.id for r in claim(db, types=("email",), limit=5)] == [ids[2], ids[1]]
            assert [r.id for r in claim(db, types=("email", "pdf"), now=at(5))] == [ids[0], ids[3]]
            assert table_counts(db) == (5, 9)  # 5 created, 4 claimed
        finally:
            db.close()
