"""The one way tests get a fresh database: `fresh_database(backend, workdir)`, migrated to
head, dropped afterwards (`migrated=False`: empty, for the tests of the migrations).

Migrating costs far more than copying, so each test process migrates one template per
backend, once, and every fresh database is a copy of it: on SQLite a copy of the template's
file, on PostgreSQL `CREATE DATABASE … TEMPLATE`. The templates are named, like every test
database, after the process (`tests.server.DATABASE_PREFIX`), so that parallel test
processes (pytest-xdist workers, other runs) never share one, and a crashed run's are
dropped by the next (`tests.support.drop_stale_pg_databases`)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from queuelog.storage.db import Database
from queuelog.storage.migrate import migrate
from tests.server import DATABASE_PREFIX, PG_ADMIN_URL, database_url

__all__ = ["drop_templates", "fresh_database"]

_lock = threading.Lock()
_templates: dict[str, str] = {}  # backend -> the template's SQLite path or PostgreSQL name
_workdir: Path | None = None


def _pg_url(name: str) -> str:
    return make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)


def _migrate(url: str) -> None:
    db = Database(url)
    try:
        migrate(db)
    finally:
        db.close()


def _template(backend: str) -> str:
    """The process's migrated template on `backend`, made on first use."""
    global _workdir
    with _lock:
        if backend in _templates:
            return _templates[backend]
        if backend == "sqlite":
            if _workdir is None:
                _workdir = Path(tempfile.mkdtemp(prefix="queuelog-templates-"))
            path = _workdir / "template.db"
            _migrate(f"sqlite:///{path}")
            with sqlite3.connect(path) as conn:  # everything in the main file: copy it alone
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            _templates[backend] = str(path)
        else:
            name = f"{DATABASE_PREFIX}{os.getpid()}_template"
            with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                conn.execute(f'CREATE DATABASE "{name}"')
            _migrate(_pg_url(name))
            _templates[backend] = name
        return _templates[backend]


@contextmanager
def fresh_database(backend: str, workdir: Path, *, migrated: bool = True) -> Iterator[str]:
    """The URL of a fresh database on `backend` ("sqlite" or "postgresql"), migrated to
    head unless `migrated=False`; dropped (its files removed) on exit."""
    if not migrated:
        with database_url(backend, workdir) as url:
            yield url
        return
    template = _template(backend)
    if backend == "sqlite":
        path = workdir / f"q-{uuid.uuid4().hex[:8]}.db"
        shutil.copyfile(template, path)
        try:
            yield f"sqlite:///{path}"
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    name = f"{DATABASE_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        yield _pg_url(name)
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def drop_templates() -> None:
    """Drop this process's templates (at the end of its test session)."""
    global _workdir
    with _lock:
        name = _templates.pop("postgresql", None)
        if name is not None:
            with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        _templates.pop("sqlite", None)
        if _workdir is not None:
            shutil.rmtree(_workdir, ignore_errors=True)
            _workdir = None
