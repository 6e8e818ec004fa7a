"""`reused_db_url`: a fresh SQLite file per test (`tests.templates`), but one PostgreSQL
database per session, emptied before each test (TRUNCATE … RESTART IDENTITY) rather than
copied and dropped. A directory of many small tests makes it its `db_url`:

    @pytest.fixture
    def db_url(reused_db_url: str) -> str:
        return reused_db_url
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from queuelog.storage.db import normalize_url
from tests.templates import fresh_database


@pytest.fixture(scope="session")
def session_pg_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fresh_database("postgresql", tmp_path_factory.mktemp("pg")) as url:
        yield url


def empty_tables(url: str) -> None:
    engine = sa.create_engine(normalize_url(url), poolclass=sa.NullPool)
    try:
        with engine.begin() as conn:
            names = conn.exec_driver_sql(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                " AND tablename <> 'alembic_version'"
            ).scalars()
            tables = ", ".join(f'"{n}"' for n in names)
            conn.exec_driver_sql(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")
    finally:
        engine.dispose()


@pytest.fixture
def reused_db_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    if backend == "sqlite":
        with fresh_database(backend, tmp_path) as url:
            yield url
        return
    url = str(request.getfixturevalue("session_pg_url"))
    empty_tables(url)
    yield url
