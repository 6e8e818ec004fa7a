"""Test support: databases on both backends, the fake clock, and the one way the tests start
a live `queuelog serve`: `live_server(db_url, workdir, **settings)` (the `start_server`
fixture wraps it for a test's own database)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Self

import httpx
import psycopg
import pytest

from queuelog.config import Settings
from tests.server import (
    DATABASE_PREFIX,
    PG_ADMIN_URL,
    GraphQLErrors,
    ServerProcess,
    free_port,
)
from tests.templates import fresh_database

__all__ = [
    "ADMIN_SECRET",
    "BACKENDS",
    "JOB_TYPES",
    "T0",
    "Clock",
    "GraphQLErrors",
    "LiveServer",
    "SharedServers",
    "drop_stale_pg_databases",
    "free_port",
    "key_refused",
    "live_server",
    "session_server",
    "settings_env",
]

BACKENDS = ("sqlite", "postgresql")
# Enough job types that every test can have its own, so tests sharing a server never
# claim each other's jobs.
JOB_TYPES = ("email", "pdf", "sync", *(f"t{i}" for i in range(1000)))
ADMIN_SECRET = "ql_test_admin_secret_0123456789abcdef"
# Many tests share one server and one admin key, and some read every job with its whole
# history: the edge's limits are tested by tests/security on servers of their own. Two
# readers each keep the test servers' PostgreSQL connections few, as parallel test runs
# share one PostgreSQL.
TEST_SETTINGS: dict[str, object] = {
    "maintenance_interval_seconds": 0.5,
    "pool_size": 2,
    "rate_limit_per_second": 100_000,
    "rate_limit_burst": 100_000,
    "auth_failure_burst": 100_000,
    "anonymous_rate_limit_burst": 100_000,
    "max_cost": 10_000_000,
}
SIBLING_SETTINGS: dict[str, object] = {"claim_recheck_seconds": 3600}
T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    """The injectable clock of `JobService(clock=…)`: time moves only when a test says so."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def key_refused(response: httpx.Response) -> bool:
    """Whether an `application/json` request was refused for its key: 200, no `data` (nothing
    ran), one UNAUTHENTICATED error, and its message repeated in `WWW-Authenticate`."""
    body = response.json()
    errors = body.get("errors") or [{}]
    refused = response.status_code == 200 and "data" not in body and len(errors) == 1
    refused = refused and errors[0].get("extensions", {}).get("code") == "UNAUTHENTICATED"
    challenge = response.headers.get("www-authenticate", "")
    return refused and f'error_description="{errors[0]["message"]}"' in challenge


def drop_stale_pg_databases() -> None:
    """Drop test databases left by earlier runs whose process is gone."""
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE %s", (DATABASE_PREFIX + "%",)
            )
        ]
        for name in names:
            m = re.match(rf"{DATABASE_PREFIX}(\d+)_", name)
            if m and not Path(f"/proc/{m.group(1)}").exists():
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _env_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def settings_env(settings: Mapping[str, object]) -> dict[str, str]:
    """`QUEUELOG_*` variables for settings named as `Settings` fields; a name that is not a
    setting fails, so a typo cannot silently test the default."""
    unknown = set(settings) - set(Settings.model_fields)
    if unknown:
        raise TypeError(f"not a queuelog setting: {', '.join(sorted(unknown))}")
    return {f"QUEUELOG_{name.upper()}": _env_value(v) for name, v in settings.items()}


@dataclass
class LiveServer(ServerProcess):
    """A server as the tests want it: many job types, a fast maintenance loop, and the
    edge's limits raised (`TEST_SETTINGS`), under whatever the test sets itself."""

    admin_key: str = ADMIN_SECRET
    job_types: tuple[str, ...] = JOB_TYPES

    def env(self) -> dict[str, str]:
        env = super().env()
        defaults = settings_env(TEST_SETTINGS)
        env.update({k: v for k, v in defaults.items() if k not in self.env_extra})
        return env

    def sibling(self) -> LiveServer:
        """Another server (not yet started) on this one's database with its settings."""
        return replace(self, port=free_port(), proc=None)


@contextmanager
def live_server(
    db_url: str, workdir: Path, *, port: int | None = None, **settings: object
) -> Iterator[LiveServer]:
    """A running `queuelog serve` on `db_url` (on `port`, else a free one): the test
    defaults, then `settings` (names of `Settings` fields, e.g. `max_depth=3`;
    `admin_key=None` starts it without one). Stopped (SIGTERM) on exit."""
    server = LiveServer(db_url, workdir, settings_env(settings), port=port or free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


def session_server(
    tmp_path_factory: pytest.TempPathFactory, backend: str, name: str, **settings: object
) -> Iterator[LiveServer]:
    """For a long-lived fixture: a fresh database on `backend` and a live server on it."""
    tmp = tmp_path_factory.mktemp(name)
    with fresh_database(backend, tmp) as url, live_server(url, tmp, **settings) as server:
        yield server


class SharedServers:
    """The servers a session shares, each started on first use and stopped at the end: one
    per backend and fast-path setting, each on a fresh database, and one sibling (a replica
    on its database, `SIBLING_SETTINGS` over its settings) of each."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._tmp = tmp_path_factory
        self._stack = ExitStack()
        self._servers: dict[tuple[str, bool], LiveServer] = {}
        self._siblings: dict[int, LiveServer] = {}

    def get(self, backend: str, *, prepared_operations: bool) -> LiveServer:
        key = (backend, prepared_operations)
        if key not in self._servers:
            tmp = self._tmp.mktemp(f"server-{backend}")
            url = self._stack.enter_context(fresh_database(backend, tmp))
            live = live_server(url, tmp, prepared_operations=prepared_operations)
            self._servers[key] = self._stack.enter_context(live)
        return self._servers[key]

    def sibling(self, server: LiveServer) -> LiveServer:
        """A replica of `server` whose waiting claims never try again on their own: a claim
        it answers with a job was woken for it."""
        if server.port not in self._siblings:
            other = server.sibling()
            other.env_extra = {**other.env_extra, **settings_env(SIBLING_SETTINGS)}
            other.start()
            self._stack.callback(other.stop)
            self._siblings[server.port] = other
        return self._siblings[server.port]

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
