"""Storage conformance: migrations, and the agreement of the migrations with the model
(`tables.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic.config import Config
from alembic.script import ScriptDirectory

from queuelog.domain.lifecycle import Status
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database, normalize_url
from queuelog.storage.migrate import SCRIPTS, migrate
from queuelog.storage.scope import EVERYTHING, Scope
from queuelog.storage.tables import job_events, jobs, metadata
from queuelog.storage.tx import Tx
from tests.storage.rows import at, claim, insert, job, table_counts
from tests.templates import fresh_database

# -- migrations -------------------------------------------------------------------------------


def _revision(db: Database) -> str | None:
    return db.read_sync(
        lambda tx: tx.conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    )


def _insert_as_before(db: Database, *rows: dict[str, Any]) -> list[int]:
    """Jobs and their creation events, as a version before the job counts wrote them."""

    def write(tx: Tx) -> list[int]:
        ids = []
        for row in rows:
            job_id = tx.conn.execute(jobs.insert().values(row).returning(jobs.c.id)).scalar_one()
            tx.conn.execute(
                job_events.insert().values(
                    job_id=job_id,
                    job_type=row["type"],
                    producer=row["producer"],
                    worker_id=row.get("worker_id"),
                    previous_status=None,
                    status=row["status"],
                    occurred_at=row["updated_at"],
                )
            )
            ids.append(job_id)
        return ids

    return db.write_sync(write)


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
    with fresh_database(backend, tmp_path, migrated=False) as url:
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
    with fresh_database(backend, tmp_path, migrated=False) as url:
        db = Database(url)
        try:
            migrate(db, "0002")
            assert _revision(db) == "0002"
            assert "(priority DESC, run_at, id)" in _index_sql(db.writer)["ix_jobs_claim"]
            ids = _insert_as_before(
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


def test_upgrading_from_0003_keeps_every_job_claimable_and_prunable(
    backend: str, tmp_path: Path
) -> None:
    """0004 rebuilds the secondary indexes partial under a database that holds jobs already:
    pending jobs stay claimable, finished ones prunable, and no index but the claim index
    finds pending jobs on PostgreSQL."""
    with fresh_database(backend, tmp_path, migrated=False) as url:
        db = Database(url)
        try:
            migrate(db, "0003")
            pending = _insert_as_before(db, job(priority=10), job(priority=30))
            _insert_as_before(db, job(status="completed", finished_at=at(-60), worker_id="w1"))
            migrate(db)
            assert _revision(db) == _head()
            indexes = _index_sql(db.writer)
            assert "finished_at IS NOT NULL" in indexes["ix_jobs_finished"]
            assert "worker_id IS NOT NULL" in indexes["ix_jobs_worker"]
            if backend == "postgresql":
                assert "<> 'pending'" in indexes["ix_jobs_status_type"]
            assert [r.id for r in claim(db, types=("email",), limit=5)] == pending[::-1]
            assert db.write_sync(jobs_sql.prune, "completed", at(0), 10) == 1
            assert table_counts(db)[0] == 2
        finally:
            db.close()


def test_upgrading_from_0004_counts_the_jobs_there_are(backend: str, tmp_path: Path) -> None:
    """0005 fills the job counts from the table; from then on every change keeps them."""
    with fresh_database(backend, tmp_path, migrated=False) as url:
        db = Database(url)
        try:
            migrate(db, "0004")
            _insert_as_before(
                db,
                job(),
                job(),
                job(type="pdf"),
                job(producer="p2"),
                job(status="completed", finished_at=at(-60), worker_id="w1"),
            )
            migrate(db)
            assert _revision(db) == _head()
            by_status = db.read_sync(jobs_sql.counts, scope=EVERYTHING, job_type=None)
            assert by_status == {
                **dict.fromkeys((s.value for s in Status), 0),
                "pending": 4,
                "completed": 1,
            }
            insert(db, job(producer="p2"))
            claim(db, types=("pdf",))
            mine = db.read_sync(jobs_sql.counts, scope=Scope(producer="p2"), job_type=None)
            assert mine["pending"] == 2
            pdf = db.read_sync(jobs_sql.counts, scope=EVERYTHING, job_type="pdf")
            assert (pdf["pending"], pdf["running"]) == (0, 1)
        finally:
            db.close()


def _prebuilt_index_statements() -> list[str]:
    """The CREATE INDEX CONCURRENTLY statements docs/deployment.md gives operators."""
    doc = (Path(__file__).parents[2] / "docs" / "deployment.md").read_text()
    return [line for line in doc.splitlines() if line.startswith("CREATE INDEX CONCURRENTLY")]


def test_indexes_built_beforehand_as_the_deployment_guide_says_are_kept(
    backend: str, tmp_path: Path
) -> None:
    """An operator with a large table builds 0006's and 0009's indexes CONCURRENTLY before
    upgrading: the migrations accept them, and the result is the model's indexes."""
    statements = _prebuilt_index_statements()
    assert len(statements) == 5, statements
    with fresh_database(backend, tmp_path, migrated=False) as url:
        db = Database(url)
        try:
            migrate(db, "0005")
            _insert_as_before(db, job(), job(status="completed", finished_at=at(-60)))
            engine = sa.create_engine(normalize_url(url), poolclass=sa.NullPool)
            try:
                with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                    for statement in statements:
                        if backend == "sqlite":  # SQLite has no concurrent build
                            statement = statement.replace(" CONCURRENTLY", "")
                        conn.exec_driver_sql(statement.rstrip(";"))
                prebuilt = _index_sql(engine)
            finally:
                engine.dispose()
            migrate(db)
            assert _revision(db) == _head()
            migrated = _index_sql(db.writer)
            for name in ("ix_job_events_producer", "ix_jobs_created", "ix_job_events_occurred"):
                assert migrated[name] == prebuilt[name]
        finally:
            db.close()
    with fresh_database(backend, tmp_path, migrated=False) as url:
        engine = sa.create_engine(normalize_url(url), poolclass=sa.NullPool)
        try:
            metadata.create_all(engine)
            assert _index_sql(engine) == migrated
        finally:
            engine.dispose()
