"""Servers of the security suite: each is a real `queuelog serve` with its own settings,
attacked over HTTP and WebSocket as an outsider would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from queuelog.config import Settings
from tests.support import LiveServer, live_server
from tests.templates import fresh_database

# The shared test servers raise these limits (tests/support.py); these servers use the
# shipped defaults.
DEFAULT_LIMITS = {
    name: Settings.model_fields[name].default
    for name in ("max_cost", "rate_limit_burst", "auth_failure_burst", "anonymous_rate_limit_burst")
}


def start(tmp: Path, backend: str, **settings: object) -> Iterator[LiveServer]:
    with fresh_database(backend, tmp) as url, live_server(url, tmp, **settings) as live:
        yield live


@pytest.fixture(scope="session")
def edge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """Shipped defaults (limits, GraphiQL, introspection, no suggestions), except a rate
    limit high enough for the tests' own traffic. The limits are refused before execution,
    so one backend is enough."""
    limits = {**DEFAULT_LIMITS, "rate_limit_burst": 100_000, "anonymous_rate_limit_burst": 100_000}
    yield from start(tmp_path_factory.mktemp("edge"), "sqlite", **limits)


@pytest.fixture(scope="session")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """Every switch turned the other way, and a tiny execution timeout."""
    yield from start(
        tmp_path_factory.mktemp("locked"),
        "sqlite",
        introspection=False,
        graphiql=False,
        field_suggestions=True,
        max_depth=3,
        execution_timeout_seconds=0.000001,
        allowed_origins=("https://app.example.com",),
    )


@pytest.fixture(scope="session")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """Low rate limits: 4 requests per key then 2 per second; 3 failed logins per address
    then one a minute; 5 requests without a key per address then one a minute."""
    yield from start(
        tmp_path_factory.mktemp("limited"),
        "sqlite",
        rate_limit_per_second=2,
        rate_limit_burst=4,
        auth_failures_per_minute=1,
        auth_failure_burst=3,
        anonymous_rate_limit_per_second=1 / 60,
        anonymous_rate_limit_burst=5,
    )
