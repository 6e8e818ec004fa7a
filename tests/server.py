"""A real `queuelog serve` in a subprocess, and fresh databases to run it on: what the
tests (through `tests.support.live_server`) and the benchmarks start. It lives beside the
tests, not in the package, because it needs the test extra (httpx)."""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import httpx
import psycopg
from sqlalchemy.engine import make_url

PG_ADMIN_URL = os.environ.get(
    "QUEUELOG_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
DATABASE_PREFIX = "queuelog_test_"

# One pooled client for every server of the process: a new client per call is slow.
_CLIENT = httpx.Client()


@contextmanager
def database_url(backend: str, workdir: Path, prefix: str = DATABASE_PREFIX) -> Iterator[str]:
    """A fresh, empty database on `backend` ("sqlite" or "postgresql"), dropped afterwards.
    PostgreSQL databases are named `<prefix><pid>_<random>`."""
    if backend == "sqlite":
        path = workdir / f"q-{uuid.uuid4().hex[:8]}.db"
        try:
            yield f"sqlite:///{path}"
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    name = f"{prefix}{os.getpid()}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class GraphQLErrors(AssertionError):
    """An operation that had to succeed answered with errors."""


@dataclass
class ServerProcess:
    """A `queuelog serve` subprocess on `db_url`, and a small GraphQL client for it."""

    db_url: str
    workdir: Path
    env_extra: dict[str, str] = field(default_factory=dict)
    admin_key: str = "ql_testing_admin_secret_0123456789abcdef"
    job_types: tuple[str, ...] = ("email", "pdf", "sync")
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    _names: Iterator[int] = field(default_factory=itertools.count)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/graphql"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/graphql"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "the server is not running"
        return self.proc.pid

    @property
    def log_path(self) -> Path:
        return self.workdir / f"server-{self.port}.log"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            QUEUELOG_DATABASE_URL=self.db_url,
            QUEUELOG_ADMIN_KEY=self.admin_key,
            QUEUELOG_JOB_TYPES=",".join(self.job_types),
        )
        env.update(self.env_extra)
        return env

    def start(self, timeout: float = 90) -> Self:
        cmd = [sys.executable, "-m", "queuelog.cli", "serve", "--port", str(self.port)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [*cmd, "--log-level", "warning"],
                cwd=self.workdir,
                env=self.env(),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log()}")
            try:
                health = httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1)
                if health.status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop(signal.SIGKILL)  # not left behind, holding its port and database
        raise RuntimeError(f"server did not start in {timeout:.0f} s: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

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
        """Create an API key through the API with the admin key; returns its secret."""
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
            self.admin_key,
        )["createApiKey"]
        if data["userErrors"]:
            raise GraphQLErrors(data["userErrors"])
        return str(data["secret"])
