"""A live server per backend tuned for production drills: a fast maintenance loop, short
default leases, per-type defaults from a TOML file."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import BACKENDS, JOB_TYPES, LiveServer, session_server

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
PROD_SETTINGS: dict[str, object] = {
    "job_types": (*JOB_TYPES, *SPECIAL_TYPES),
    "maintenance_interval_seconds": 0.2,
    "default_lease_seconds": DEFAULT_LEASE,
    "backoff_base_seconds": 0.1,
    "backoff_max_seconds": 0.3,
}


@pytest.fixture(scope="session", params=BACKENDS)
def prod(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    config = tmp_path_factory.mktemp("config") / "queuelog.toml"
    config.write_text(TOML)
    backend = str(request.param)
    yield from session_server(
        tmp_path_factory, backend, f"prod-{backend}", config=config, **PROD_SETTINGS
    )
