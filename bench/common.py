"""What every benchmark shares: statistics, throwaway databases, a live server, RSS."""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from queuelog import testing
from queuelog.testing import ServerProcess

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


def psycopg_url(url: str) -> str:
    """A SQLAlchemy-style URL as libpq takes it."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def sqlite_path(url: str) -> str:
    return str(make_url(url).database)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process `pid` has used, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def database_url(backend: str, workdir: Path) -> AbstractContextManager[str]:
    """A fresh, empty database on `backend`, dropped afterwards."""
    return testing.database_url(backend, workdir, prefix="queuelog_bench_")


class Server(ServerProcess):
    """One `queuelog serve` process with the rate limiter off."""

    def __init__(self, db_url: str, workdir: Path) -> None:
        super().__init__(
            db_url,
            workdir,
            {"QUEUELOG_RATE_LIMIT_PER_SECOND": "0"},
            admin_key=ADMIN_SECRET,
            job_types=JOB_TYPES,
        )
