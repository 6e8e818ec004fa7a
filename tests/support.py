"""Test support: databases on both backends, and live `queuelog serve` processes."""

from __future__ import annotations

import itertools
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from sqlalchemy.engine import make_url

PG_ADMIN_URL = os.environ.get(
    "QUEUELOG_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
PREFIX = "queuelog_test_"
BACKENDS = ("sqlite", "postgresql")
# Enough job types that every test can have its own, so tests sharing a server never
# claim each other's jobs.
JOB_TYPES = ("email", "pdf", "sync", *(f"t{i}" for i in range(1000)))
ADMIN_SECRET = "ql_test_admin_secret_0123456789abcdef"


def _pg_admin() -> psycopg.Connection[Any]:
    return psycopg.connect(PG_ADMIN_URL, autocommit=True)


def drop_stale_pg_databases() -> None:
    """Drop test databases left by earlier runs whose process is gone."""
    with _pg_admin() as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE %s", (PREFIX + "%",)
            )
        ]
        for name in names:
            m = re.match(rf"{PREFIX}(\d+)_", name)
            if m and not Path(f"/proc/{m.group(1)}").exists():
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def database_url(backend: str, tmp: Path) -> Iterator[str]:
    """A fresh, empty database on `backend`, dropped afterwards."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp / f'q-{uuid.uuid4().hex[:8]}.db'}"
        return
    name = f"{PREFIX}{os.getpid()}_{uuid.uuid4().hex[:10]}"
    with _pg_admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with _pg_admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# One pooled client for the whole session: a new httpx client costs ~20 ms.
_CLIENT = httpx.Client()


class GraphQLErrors(AssertionError):
    pass


@dataclass
class LiveServer:
    """A `queuelog serve` subprocess, and a small GraphQL client for it."""

    db_url: str
    workdir: Path
    env_extra: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    _names: Iterator[int] = field(default_factory=itertools.count)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/graphql"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/graphql"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            QUEUELOG_DATABASE_URL=self.db_url,
            QUEUELOG_ADMIN_KEY=ADMIN_SECRET,
            QUEUELOG_JOB_TYPES=",".join(JOB_TYPES),
            QUEUELOG_MAINTENANCE_INTERVAL_SECONDS="0.5",
            # Many tests share one server and one admin key, and some read every job with
            # its whole history: the edge's limits are tested by tests/security on servers
            # of their own.
            QUEUELOG_RATE_LIMIT_PER_SECOND="100000",
            QUEUELOG_RATE_LIMIT_BURST="100000",
            QUEUELOG_AUTH_FAILURE_BURST="100000",
            QUEUELOG_MAX_COST="10000000",
        )
        env.update(self.env_extra)
        return env

    def start(self) -> LiveServer:
        log = open(self.workdir / f"server-{self.port}.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "queuelog.cli",
                "serve",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
            ],
            cwd=self.workdir,
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log()}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(f"server did not start: {self.log()}")

    def log(self) -> str:
        path = self.workdir / f"server-{self.port}.log"
        return path.read_text() if path.exists() else ""

    def stop(self, sig: int | None = None) -> None:
        if self.proc is None:
            return
        if sig is None:
            self.proc.terminate()
        else:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    # -- client -------------------------------------------------------------------------

    def post(
        self, query: str, variables: dict[str, Any] | None = None, key: str | None = None, **kw: Any
    ) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return _CLIENT.post(
            self.url,
            json={"query": query, "variables": variables or {}},
            headers=headers,
            timeout=30,
            **kw,
        )

    def gql(
        self, query: str, variables: dict[str, Any] | None = None, key: str | None = None
    ) -> dict[str, Any]:
        """Run an operation that must succeed; return its `data`."""
        body = self.post(query, variables, key).json()
        if body.get("errors"):
            raise GraphQLErrors(body["errors"])
        return dict(body["data"])

    def unique_name(self, stem: str) -> str:
        return f"{stem}-{os.getpid()}-{next(self._names)}"

    def create_key(
        self,
        role: str,
        types: list[str] | None = None,
        max_priority: str = "MEDIUM",
        name: str | None = None,
    ) -> str:
        """Create an API key through the API; returns its secret."""
        data = self.gql(
            """mutation($input: CreateApiKeyInput!) {
                 createApiKey(input: $input) { secret userErrors { code message } } }""",
            {
                "input": {
                    "name": name or self.unique_name(role.lower()),
                    "role": role,
                    "allowedTypes": types,
                    "maxPriority": max_priority,
                }
            },
            ADMIN_SECRET,
        )["createApiKey"]
        assert not data["userErrors"], data
        return str(data["secret"])
