"""Servers of the security suite: each is a real `queuelog serve` with its own settings,
attacked over HTTP and WebSocket as an outsider would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from queuelog.config import Settings
from tests.support import LiveServer, database_url

# The shared test servers raise these limits (tests/support.py); these servers use the
# shipped defaults.
DEFAULT_LIMITS = {
    f"QUEUELOG_{name.upper()}": str(Settings.model_fields[name].default)
    for name in ("max_cost", "rate_limit_burst", "auth_failure_burst", "anonymous_rate_limit_burst")
}


def start(tmp: Path, backend: str, **env: str) -> Iterator[LiveServer]:
    with database_url(backend, tmp) as url:
        live = LiveServer(url, tmp, env_extra=env).start()
        try:
            yield live
        finally:
            live.stop()


@pytest.fixture(scope="session")
def edge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """Shipped defaults (limits, GraphiQL, introspection, no suggestions), except a rate
    limit high enough for the tests' own traffic. The limits are refused before execution,
    so one backend is enough."""
    env = {
        **DEFAULT_LIMITS,
        "QUEUELOG_RATE_LIMIT_BURST": "100000",
        "QUEUELOG_ANONYMOUS_RATE_LIMIT_BURST": "100000",
    }
    yield from start(tmp_path_factory.mktemp("edge"), "sqlite", **env)


@pytest.fixture(scope="session")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """Every switch turned the other way, and a tiny execution timeout."""
    yield from start(
        tmp_path_factory.mktemp("locked"),
        "sqlite",
        QUEUELOG_INTROSPECTION="false",
        QUEUELOG_GRAPHIQL="false",
        QUEUELOG_FIELD_SUGGESTIONS="true",
        QUEUELOG_MAX_DEPTH="3",
        QUEUELOG_EXECUTION_TIMEOUT_SECONDS="0.000001",
        QUEUELOG_ALLOWED_ORIGINS="https://app.example.com",
    )


@pytest.fixture(scope="session")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """Low rate limits: 4 requests per key then 2 per second; 3 failed logins per address
    then one a minute; 5 requests without a key per address then one a minute."""
    yield from start(
        tmp_path_factory.mktemp("limited"),
        "sqlite",
        QUEUELOG_RATE_LIMIT_PER_SECOND="2",
        QUEUELOG_RATE_LIMIT_BURST="4",
        QUEUELOG_AUTH_FAILURES_PER_MINUTE="1",
        QUEUELOG_AUTH_FAILURE_BURST="3",
        QUEUELOG_ANONYMOUS_RATE_LIMIT_PER_SECOND=str(1 / 60),
        QUEUELOG_ANONYMOUS_RATE_LIMIT_BURST="5",
    )
