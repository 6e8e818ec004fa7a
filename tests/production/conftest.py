"""A live server per backend tuned for production drills: a fast maintenance loop, short
default leases, per-type defaults from a TOML file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import BACKENDS, JOB_TYPES, LiveServer, database_url

# Job types with their own defaults in the TOML file; each belongs to one test.
TOML = """
[types.leasy]
lease_seconds = 7

[types.backoff]
backoff_base_seconds = 0.25
backoff_max_seconds = 0.6

[types.instant]
backoff_base_seconds = 0
"""
SPECIAL_TYPES = ("leasy", "backoff", "instant")
DEFAULT_LEASE = 4
PROD_ENV = {
    "QUEUELOG_JOB_TYPES": ",".join((*JOB_TYPES, *SPECIAL_TYPES)),
    "QUEUELOG_MAINTENANCE_INTERVAL_SECONDS": "0.2",
    "QUEUELOG_DEFAULT_LEASE_SECONDS": str(DEFAULT_LEASE),
    "QUEUELOG_BACKOFF_BASE_SECONDS": "0.1",
    "QUEUELOG_BACKOFF_MAX_SECONDS": "0.3",
}


@pytest.fixture(scope="session", params=BACKENDS)
def prod(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp(f"prod-{request.param}")
    config = tmp / "queuelog.toml"
    config.write_text(TOML)
    with database_url(str(request.param), tmp) as url:
        live = LiveServer(url, tmp, {**PROD_ENV, "QUEUELOG_CONFIG": str(config)}).start()
        try:
            yield live
        finally:
            live.stop()


@pytest.fixture
def db(backend: str, tmp_path: Path) -> Iterator[str]:
    """A fresh database for tests that run their own servers."""
    with database_url(backend, tmp_path) as url:
        yield url
