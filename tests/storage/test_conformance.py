"""One conformance suite for the storage layer, run on SQLite and on PostgreSQL alike.

Every test drives `queuelog.storage` directly through `Database.write_sync` / `read_sync`,
so that a backend that differs from the other fails here before it fails in the service.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
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
from queuelog.storage.db import Database, Tx
from queuelog.storage.migrate import SCRIPTS, migrate
from queuelog.storage.tables import job_events, jobs

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


def test_claim_reads_the_partial_claim_index(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """The claim statement, as the server runs it, is planned on ix_jobs_claim and needs no
    sort of the pending jobs (a full sort per claim is 300x slower at 100k pending)."""
    insert(db, *(job(type=("email", "pdf")[i % 2], priority=(i % 4) * 10) for i in range(300)))
    seen: list[tuple[str, list[Any]]] = []
    sent = driver.execute

    def capture(tx: Any, text: str, params: Any) -> Any:
        params = list(params)
        if "UPDATE jobs" in text:
            seen.append((text, [driver.bind(db.dialect, p) for p in params]))
        return sent(tx, text, params)

    monkeypatch.setattr(driver, "execute", capture)
    assert len(claim(db, types=("email", "pdf"), limit=1)) == 1
    statement, params = seen[-1]
    with db.reader.connect() as conn:
        if db.dialect == "sqlite":
            explain = "EXPLAIN QUERY PLAN " + statement
            plan = " ".join(str(r[-1]) for r in conn.exec_driver_sql(explain, tuple(params)))
            assert "USING INDEX ix_jobs_claim" in plan and "TEMP B-TREE" not in plan, plan
        else:
            plan = _pg_generic_plan(conn, statement, params)
            assert "ix_jobs_claim" in plan and "Sort" not in plan, plan


def _pg_generic_plan(conn: sa.Connection, statement: str, params: list[Any]) -> str:
    """EXPLAIN the generic plan of `statement`: the plan a prepared statement (psycopg
    prepares a query it runs often) may settle on, made without knowing the parameters."""
    raw = conn.connection.driver_connection
    assert isinstance(raw, psycopg.Connection)
    numbered = iter(range(1, len(params) + 1))
    prepared = re.sub(r"\?", lambda m: f"${next(numbered)}", statement)
    args = ", ".join(psycopg.ClientCursor(raw).mogrify("%s", [p]) for p in params)
    raw.execute("ANALYZE jobs")
    raw.execute("SET plan_cache_mode = force_generic_plan")
    raw.execute(f"PREPARE claim_plan AS {prepared}".encode())
    try:
        rows = raw.execute(f"EXPLAIN EXECUTE claim_plan({args})".encode()).fetchall()
    finally:
        raw.execute("DEALLOCATE claim_plan")
        raw.execute("RESET plan_cache_mode")
    return " ".join(str(r[0]) for r in rows)


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


def test_migration_reaches_head_and_a_second_run_is_a_no_op(db: Database) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPTS))
    head = ScriptDirectory.from_config(cfg).get_current_head()
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


def test_the_claim_index_is_partial_on_pending(db: Database) -> None:
    with db.writer.connect() as conn:
        if db.dialect == "sqlite":
            sql = conn.exec_driver_sql(
                "SELECT sql FROM sqlite_master WHERE name = 'ix_jobs_claim'"
            ).scalar()
        else:
            sql = conn.exec_driver_sql(
                "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_jobs_claim'"
            ).scalar()
    assert sql is not None
    assert "priority DESC" in sql and "WHERE" in sql and "'pending'" in sql, sql
