"""Test support: databases on both backends, and live `queuelog serve` processes
(`queuelog.testing`, set up for a test session)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg

from queuelog.testing import (
    DATABASE_PREFIX,
    PG_ADMIN_URL,
    GraphQLErrors,
    ServerProcess,
    database_url,
    free_port,
)

__all__ = [
    "ADMIN_SECRET",
    "BACKENDS",
    "JOB_TYPES",
    "GraphQLErrors",
    "LiveServer",
    "database_url",
    "drop_stale_pg_databases",
    "free_port",
    "key_refused",
]

BACKENDS = ("sqlite", "postgresql")
# Enough job types that every test can have its own, so tests sharing a server never
# claim each other's jobs.
JOB_TYPES = ("email", "pdf", "sync", *(f"t{i}" for i in range(1000)))
ADMIN_SECRET = "ql_test_admin_secret_0123456789abcdef"
TEST_SETTINGS = {
    "QUEUELOG_MAINTENANCE_INTERVAL_SECONDS": "0.5",
    # Many tests share one server and one admin key, and some read every job with its
    # whole history: the edge's limits are tested by tests/security on servers of its own.
    "QUEUELOG_RATE_LIMIT_PER_SECOND": "100000",
    "QUEUELOG_RATE_LIMIT_BURST": "100000",
    "QUEUELOG_AUTH_FAILURE_BURST": "100000",
    "QUEUELOG_ANONYMOUS_RATE_LIMIT_BURST": "100000",
    "QUEUELOG_MAX_COST": "10000000",
}


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


@dataclass
class LiveServer(ServerProcess):
    """A server as the tests want it: many job types, a fast maintenance loop, and the
    edge's limits raised (tests/security checks those on servers of its own)."""

    admin_key: str = ADMIN_SECRET
    job_types: tuple[str, ...] = JOB_TYPES

    def env(self) -> dict[str, str]:
        env = super().env()
        env.update({k: v for k, v in TEST_SETTINGS.items() if k not in self.env_extra})
        return env
