"""Fixtures every test may use. Each name means one thing across the suite:

- `backend`: "sqlite" or "postgresql" (tests that take it run on both);
- `db_url`: the URL of a fresh database on `backend`, migrated (`tests.templates`; the
  storage and service suites reuse one emptied PostgreSQL database: `tests.reused_db`);
- `settings`, `services`, `db`: the `Settings`, the `Services` and its `Database` on `db_url`;
- `clock`: a `Clock` for `JobService(clock=…)`;
- `start_server`: starts live servers on `db_url` (`tests.support.live_server`);
- `server`: a live server per backend shared by the session (`tests.support.SharedServers`),
  where each test keeps to its own `job_type`; `sibling`: a replica of it;
- `live`: a server in the test's own process on `services` (`tests.inprocess`).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from queuelog.config import Settings
from queuelog.runtime import Services, open_services
from queuelog.service.models import Actor, Priority, Role
from queuelog.storage.db import Database
from tests.support import (
    BACKENDS,
    JOB_TYPES,
    Clock,
    LiveServer,
    SharedServers,
    drop_stale_pg_databases,
    live_server,
)
from tests.templates import drop_templates, fresh_database

pytest_plugins = ["tests.inprocess", "tests.reused_db"]


def pytest_sessionstart(session: pytest.Session) -> None:
    drop_stale_pg_databases()


def pytest_sessionfinish(session: pytest.Session) -> None:
    drop_templates()


# Fixtures that start a server (or a browser) of their own once per session or module. Under
# pytest-xdist (`make test`: -n 2 --dist loadgroup) the tests that use one run on one
# worker, so that it starts once; the other tests go to whichever worker is free.
ONE_WORKER = (
    *("prod", "quick", "edge", "locked", "limited", "browser", "graphiql_server"),
    *("node", "sockets", "unfenced", "table_reads", "target", "shipped", "small_responses"),
    "bounded",
)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", ())
        group = next((name for name in ONE_WORKER if name in names), None)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(backend: str, tmp_path: Path) -> Iterator[str]:
    with fresh_database(backend, tmp_path) as url:
        yield url


@pytest.fixture
def settings(db_url: str) -> Settings:
    return Settings(database_url=db_url, job_types=("email", "pdf", "sync"))


@pytest.fixture
async def services(settings: Settings) -> AsyncIterator[Services]:
    s = open_services(settings)  # on a migrated database (`db_url`)
    yield s
    s.db.close()


@pytest.fixture
def db(services: Services) -> Database:
    return services.db


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def producer() -> Actor:
    return Actor("producer-1", Role.PRODUCER)


@pytest.fixture
def worker() -> Actor:
    return Actor("worker-1", Role.WORKER)


@pytest.fixture
def admin() -> Actor:
    return Actor("admin", Role.ADMIN, max_priority=Priority.CRITICAL)


@pytest.fixture
def start_server(db_url: str, tmp_path: Path) -> Iterator[Callable[..., LiveServer]]:
    """`start_server(**settings)` starts a live server on the test's database with those
    settings over the test defaults; every server it started is stopped after the test."""
    with ExitStack() as started:

        def start(**settings: object) -> LiveServer:
            return started.enter_context(live_server(db_url, tmp_path, **settings))

        yield start


# -- live servers: shared by the session; each test takes its own job type ---------------


# The fast path (prepared operations) on one backend and off on the other, the other way
# round in the API tests (tests/api) than in every other suite that shares `server`: each
# backend serves both paths through the real API, and no test runs twice for it
# (tests/prepared holds the two paths to the same answers request by request).
API_TESTS = Path(__file__).parent / "api"


def prepared_operations(backend: str, test_path: Path) -> bool:
    return (backend == "postgresql") == test_path.is_relative_to(API_TESTS)


@pytest.fixture(scope="session")
def shared_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServers]:
    with SharedServers(tmp_path_factory) as servers:
        yield servers


@pytest.fixture(params=BACKENDS)
def server(request: pytest.FixtureRequest, shared_servers: SharedServers) -> LiveServer:
    backend = str(request.param)
    return shared_servers.get(
        backend, prepared_operations=prepared_operations(backend, request.path)
    )


@pytest.fixture
def sibling(server: LiveServer, shared_servers: SharedServers) -> LiveServer:
    """A second `queuelog serve` on the shared server's database, with its settings but for
    claims that never recheck (`SharedServers.sibling`): a replica, for the tests of what one
    process's change does on the other."""
    return shared_servers.sibling(server)


_types = itertools.cycle(JOB_TYPES[3:])


@pytest.fixture
def job_type() -> str:
    """A job type no other test in this session uses (1,000 in the pool)."""
    return next(_types)


@pytest.fixture
def other_job_type(job_type: str) -> str:
    """A second job type of the test's own, for tests about keys restricted to one type."""
    return next(_types)
