"""Storage conformance: inserts, reads, retention, the event log and SQLite's settings."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest
import sqlalchemy as sa

from queuelog.domain.lifecycle import CANCEL, COMPLETE
from queuelog.storage import events as events_sql
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database
from queuelog.storage.scope import Scope
from queuelog.storage.tables import jobs
from queuelog.storage.tx import Tx
from tests.storage.plans import pg_nodes, plans_kept
from tests.storage.rows import T0, J, at, claim, events_of, insert, job, table_counts

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


def test_an_insert_returns_each_row_as_it_reads_back(db: Database) -> None:
    """An insert reads back only the new ids and builds each row from what it was given:
    those rows must equal the stored ones, times in UTC (one given in another offset, too)
    and the table's defaults included."""
    paris = timezone(timedelta(hours=1))
    given = [
        job(type="pdf", priority=30, payload='{"n": 1}', run_at=T0.astimezone(paris)),
        job(type="sync", status="completed", finished_at=at(5)),
    ]
    defaulted = [{k: v for k, v in job().items() if k != "retry_count"}]
    for batch in (given, given[:1], defaulted):
        rows = db.write_sync(jobs_sql.insert, batch)
        assert rows == [db.read_sync(jobs_sql.get, r.id) for r in rows]
        assert all(r.run_at.utcoffset() == timedelta(0) for r in rows)
    assert rows[0].retry_count == 0


def _parsed(row: Any) -> Any:
    return row._replace(payload=orjson.loads(row.payload))


def test_inserts_carry_any_text_and_time_exactly(db: Database) -> None:
    """On PostgreSQL new jobs and their events travel as one JSON parameter: text that JSON
    must escape, times in other offsets or on the whole second, and a batch's order all come
    back as given; a naive time is refused and writes nothing."""
    odd = [
        '{"q": "\\"quoted\\" \\\\ back\\\\slash", "soh": "\\u0001", "nl": "a\\nb"}',
        '{"text": "日本語 ✓ 🚀", "tab": "\\t", "ctl": "\\u001f"}',
        "[]",
    ]
    kolkata = timezone(timedelta(hours=5, minutes=30))
    given = [
        job(payload=p, producer=f'prod\\ucer "{i}" ✓\x01', run_at=at(i).astimezone(kolkata))
        for i, p in enumerate(odd)
    ]
    given.append(job(type="pdf", created_at=T0.replace(microsecond=0), updated_at=at(0.000001)))
    given += [job(priority=i % 31, run_at=at(i)) for i in range(300)]
    rows = db.write_sync(jobs_sql.insert, given)
    stored = [db.read_sync(jobs_sql.get, r.id) for r in rows]
    # The same JSON (PostgreSQL's jsonb answers it with its own key order and spacing).
    assert [_parsed(r) for r in rows] == [_parsed(r) for r in stored]
    assert [orjson.loads(r.payload) for r in rows[:3]] == [orjson.loads(p) for p in odd]
    assert rows[2].producer == 'prod\\ucer "2" ✓\x01'
    assert [r.run_at for r in rows] == [g["run_at"] for g in given]  # equal instants
    assert [r.priority for r in rows[4:]] == [i % 31 for i in range(300)]
    assert [r.id for r in rows] == sorted(r.id for r in rows)
    events = db.read_sync(events_sql.after, 0, 1000)
    assert [(e.job_id, e.producer, e.occurred_at) for e in events] == [
        (r.id, r.producer, r.updated_at) for r in rows
    ]
    # An event appended at the end of a transaction (a claim's) travels the same way.
    (claimed,) = claim(db, types=("pdf",), now=at(1), worker='w "1" ✓')
    (event,) = db.read_sync(events_sql.after, events[-1].id, 10)
    assert (event.job_id, event.worker_id, event.previous_status, event.occurred_at) == (
        claimed.id,
        'w "1" ✓',
        "pending",
        at(1),
    )

    counts = table_counts(db)
    with pytest.raises(ValueError, match="naive"):
        db.write_sync(jobs_sql.insert, [job(run_at=T0.replace(tzinfo=None))])
    assert table_counts(db) == counts


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


# -- reads ------------------------------------------------------------------------------------


def test_page_is_newest_first_with_a_cursor_and_totals(db: Database) -> None:
    ids = insert(
        db,
        *(job(producer=("p1", "p2")[i % 2], type=("email", "pdf")[i % 3 == 0]) for i in range(7)),
    )

    def page(
        producer: str | None = None, worker: str | None = None, **kw: Any
    ) -> tuple[list[int], bool, int]:
        args: dict[str, Any] = {
            "scope": Scope(producer, worker),
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

    def counts(
        producer: str | None = None, worker: str | None = None, job_type: str | None = None
    ) -> dict[str, int]:
        scope = Scope(producer, worker)
        return db.read_sync(lambda tx: jobs_sql.counts(tx, scope=scope, job_type=job_type))

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


def test_pruning_the_oldest_jobs_reads_only_their_events(db: Database) -> None:
    """Pruned jobs are the oldest, and so are their events. Finding the newest of those
    (the watermark subscriptions resume against) as max(id) let PostgreSQL walk the
    events' primary key backwards from the newest until one matched: nearly every event,
    89 ms a batch at 1.8M events. Work, not time, is measured: rows read."""
    if db.dialect != "postgresql":
        pytest.skip("SQLite reads the events by ix_job_events_job either way")
    done = [job(status="completed", finished_at=at(-10_000 + i)) for i in range(2_000)]
    insert(db, *done, *(job() for _ in range(40_000)))
    db.write_sync(lambda tx: tx.conn.exec_driver_sql("ANALYZE"))
    found: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if "max(" in statement:
            found.append((statement, params))

    sa.event.listen(db.writer, "before_cursor_execute", capture)
    try:
        assert db.write_sync(jobs_sql.prune, "completed", T0, 50) == 50
    finally:
        sa.event.remove(db.writer, "before_cursor_execute", capture)
    ((statement, params),) = found

    def explain(tx: Tx) -> Any:
        raw = tx.conn.connection.driver_connection
        assert raw is not None
        return raw.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params).fetchone()

    (plan,) = db.read_sync(explain)
    read = sum(
        n.get("Actual Rows", 0) + n.get("Rows Removed by Filter", 0)
        for n, _ in pg_nodes(plan[0]["Plan"])
        if n.get("Relation Name") == "job_events" or "job_events" in n.get("Index Name", "")
    )
    nodes = [(n["Node Type"], n.get("Index Name")) for n, _ in pg_nodes(plan[0]["Plan"])]
    assert read <= 10 * 50, nodes  # the batch's own events, not the table's 42,000


def test_prune_keeps_no_plan_made_while_the_tables_were_small(db: Database) -> None:
    """A generic plan of prune's DELETE of events, made while job_events was small, scans
    every event: each batch is planned for the tables as they are, whatever PostgreSQL
    would settle on (here, on the writer's connection, always a generic plan)."""
    if db.dialect != "postgresql":
        pytest.skip("SQLite keeps no plan")
    insert(db, *(job(status="failed", finished_at=at(-i - 1)) for i in range(16)))
    db.write_sync(lambda tx: tx.conn.exec_driver_sql("SET plan_cache_mode = force_generic_plan"))
    for _ in range(8):  # batches of the same size: psycopg prepares from the fifth
        assert db.write_sync(jobs_sql.prune, "failed", T0, 2) == 2

    ((generic, custom),) = db.write_sync(plans_kept, "DELETE FROM job_events")
    db.write_sync(lambda tx: tx.conn.exec_driver_sql("RESET plan_cache_mode"))
    assert generic == 0 and custom >= 3, (generic, custom)


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
        jobs_sql.apply(tx, CANCEL, kept, {"finished_at": T0, "updated_at": T0})
        raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        db.write_sync(boom)
    assert table_counts(db) == (1, 1)
    row = db.read_sync(jobs_sql.get, kept)
    assert row is not None and row.status == "pending"


def test_events_are_appended_in_the_same_transaction(db: Database) -> None:
    """A reader that sees the job's new status sees its event too: both or neither. An
    insert that is not its transaction's last work leaves its events for the append at the
    end (on PostgreSQL the event-order lock is the last lock taken)."""

    def enqueue_and_peek(tx: Tx) -> int:
        rows = jobs_sql.insert(tx, [job()])
        assert not tx.appended  # not yet appended: written at the end of this transaction
        assert tx.events and tx.events[0].job_id == rows[0].id
        return int(rows[0].id)

    job_id = db.write_sync(enqueue_and_peek)
    assert events_of(db, job_id) == [(None, "pending")]


async def test_an_insert_run_last_appends_its_events_itself(db: Database) -> None:
    """`write_rows` inserts run last in their transaction (`closing`): on PostgreSQL the
    jobs and their events go in one statement."""
    seen: list[tuple[bool, int]] = []

    def insert_and_peek(tx: Tx, values: list[dict[str, Any]]) -> list[Any]:
        rows = jobs_sql.insert(tx, values)
        seen.append((tx.appended, len(tx.events)))
        return rows

    (row,) = await db.write_rows(insert_and_peek, [job()])
    with_jobs = db.dialect == "postgresql"
    assert seen == [(with_jobs, 0 if with_jobs else 1)]
    assert events_of(db, row.id) == [(None, "pending")]


def test_events_for_job_after_and_head(db: Database) -> None:
    assert db.read_sync(events_sql.head) == 0
    assert db.read_sync(events_sql.oldest) == 0
    a, b = insert(db, job(type="email", producer="p1"), job(type="pdf", producer="p2"))
    claim(db, types=("pdf",))
    done = {"result": None, "finished_at": T0, "updated_at": T0}
    db.write_sync(lambda tx: jobs_sql.apply(tx, COMPLETE, b, done, worker="w1", at=T0))
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
    assert after(scope=Scope(producer="p2"), statuses=["running", "completed"]) == ids[2:]
    assert after(scope=Scope(worker="w1")) == ids[2:]
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
