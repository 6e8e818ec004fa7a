from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from queuelog.config import Settings
from queuelog.runtime import Services, open_services
from queuelog.service.models import Actor, Priority, Role
from queuelog.storage.migrate import migrate
from tests.inprocess import live  # noqa: F401  (fixture: a server in the test's process)
from tests.support import BACKENDS, JOB_TYPES, LiveServer, database_url, drop_stale_pg_databases


def pytest_sessionstart(session: pytest.Session) -> None:
    drop_stale_pg_databases()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(backend: str, tmp_path: Path) -> Iterator[str]:
    with database_url(backend, tmp_path) as url:
        yield url


@pytest.fixture
def settings(db_url: str) -> Settings:
    return Settings(database_url=db_url, job_types=("email", "pdf", "sync"))


@pytest.fixture
async def services(settings: Settings) -> AsyncIterator[Services]:
    s = open_services(settings)
    migrate(s.db)
    yield s
    s.db.close()


@pytest.fixture
def producer() -> Actor:
    return Actor("producer-1", Role.PRODUCER)


@pytest.fixture
def worker() -> Actor:
    return Actor("worker-1", Role.WORKER)


@pytest.fixture
def admin() -> Actor:
    return Actor("admin", Role.ADMIN, max_priority=Priority.CRITICAL)


# -- live servers: one per backend per session; each test takes its own job type --------


@pytest.fixture(scope="session", params=BACKENDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp(f"server-{request.param}")
    with database_url(str(request.param), tmp) as url:
        live = LiveServer(url, tmp).start()
        try:
            yield live
        finally:
            live.stop()


_types = itertools.cycle(JOB_TYPES[3:])


@pytest.fixture
def job_type() -> str:
    """A job type no other test in this session uses (1,000 in the pool)."""
    return next(_types)


@pytest.fixture
def other_job_type(job_type: str) -> str:
    """A second job type of the test's own, for tests about keys restricted to one type."""
    return next(_types)
