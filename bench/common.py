"""What every benchmark shares: statistics, throwaway databases, a live server, RSS."""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
from sqlalchemy.engine import make_url

PG_ADMIN_URL = os.environ.get(
    "QUEUELOG_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
BACKENDS = ("sqlite", "postgresql")
JOB_TYPES = ("email", "pdf", "sync")
ADMIN_SECRET = "ql_bench_admin_secret_0123456789abcdef"


@dataclass(frozen=True, slots=True)
class Profile:
    """How long and how often: the full run, or the smoke that only proves it still runs."""

    smoke: bool
    repeats: int
    service_ops: int  # operations per service-layer run
    http_seconds: float  # seconds per HTTP run
    backlogs: tuple[int, ...]
    claims: int  # timed claims per backlog run
    peer_ops: int
    soak_seconds: float

    @classmethod
    def full(cls, soak_seconds: float) -> Profile:
        return cls(False, 3, 1_000, 3.0, (1_000, 100_000, 1_000_000), 300, 1_000, soak_seconds)

    @classmethod
    def quick(cls) -> Profile:
        return cls(True, 1, 50, 0.5, (100, 1_000), 20, 50, 2.0)


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def percentile(xs: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by nearest rank."""
    ordered = sorted(xs)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


@contextmanager
def database_url(backend: str, workdir: Path) -> Iterator[str]:
    """A fresh, empty database on `backend`, dropped afterwards."""
    if backend == "sqlite":
        path = workdir / f"bench-{uuid.uuid4().hex[:8]}.db"
        try:
            yield f"sqlite:///{path}"
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    name = f"queuelog_bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def psycopg_url(url: str) -> str:
    """A SQLAlchemy-style URL as libpq takes it."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def sqlite_path(url: str) -> str:
    return str(make_url(url).database)


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One `queuelog serve` process, rate limiter off, access log off."""

    def __init__(self, db_url: str, workdir: Path) -> None:
        self.db_url = db_url
        self.workdir = workdir
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/graphql"
        self.log_path = workdir / f"server-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Server:
        env = dict(os.environ)
        env.update(
            QUEUELOG_DATABASE_URL=self.db_url,
            QUEUELOG_ADMIN_KEY=ADMIN_SECRET,
            QUEUELOG_JOB_TYPES=",".join(JOB_TYPES),
            QUEUELOG_RATE_LIMIT_PER_SECOND="0",
        )
        cmd = [sys.executable, "-m", "queuelog.cli", "serve", "--port", str(self.port)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [*cmd, "--log-level", "warning"],
                cwd=self.workdir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_path.read_text()}")
            try:
                health = httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1)
                if health.status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"server did not start: {self.log_path.read_text()}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def gql(self, query: str, variables: dict[str, Any] | None = None, key: str = "") -> Any:
        headers = {"Authorization": f"Bearer {key or ADMIN_SECRET}"}
        body = httpx.post(
            self.url, json={"query": query, "variables": variables or {}}, headers=headers
        ).json()
        if body.get("errors"):
            raise RuntimeError(f"GraphQL errors: {body['errors']}")
        return body["data"]

    def create_key(self, name: str, role: str) -> str:
        data = self.gql(
            """mutation($input: CreateApiKeyInput!) {
                 createApiKey(input: $input) { secret userErrors { code message } } }""",
            {"input": {"name": name, "role": role}},
        )["createApiKey"]
        if data["userErrors"]:
            raise RuntimeError(f"createApiKey: {data['userErrors']}")
        return str(data["secret"])
