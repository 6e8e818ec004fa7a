"""What every benchmark shares: statistics, throwaway databases, a live server, RSS, and
subscriptions over WebSocket."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy.engine import make_url
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Subprotocol

from tests import server as server_process
from tests.server import ServerProcess

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
    return server_process.database_url(backend, workdir, prefix="queuelog_bench_")


class Server(ServerProcess):
    """One `queuelog serve` process with the rate limiters off (per key and keyless)."""

    def __init__(self, db_url: str, workdir: Path) -> None:
        super().__init__(
            db_url,
            workdir,
            {
                "QUEUELOG_RATE_LIMIT_PER_SECOND": "0",
                "QUEUELOG_ANONYMOUS_RATE_LIMIT_PER_SECOND": "0",
            },
            admin_key=ADMIN_SECRET,
            job_types=JOB_TYPES,
        )


async def subscribe(
    ws_url: str, secret: str, query: str, variables: dict[str, Any] | None = None
) -> ClientConnection:
    """A graphql-transport-ws connection to `ws_url`, authenticated with the key `secret`,
    carrying one subscription (id "1") to `query`. Unbounded receive queue: a reader that
    falls behind delays deliveries rather than pausing the socket."""
    conn = await connect(ws_url, subprotocols=[Subprotocol("graphql-transport-ws")], max_queue=None)
    init = {"type": "connection_init", "payload": {"authorization": f"Bearer {secret}"}}
    await conn.send(orjson.dumps(init).decode())
    ack = orjson.loads(await conn.recv())
    if ack.get("type") != "connection_ack":
        await conn.close()
        raise RuntimeError(f"connection_init refused: {ack}")
    payload = {"query": query, "variables": variables or {}}
    await conn.send(orjson.dumps({"id": "1", "type": "subscribe", "payload": payload}).decode())
    return conn


async def deliveries(conn: ClientConnection) -> AsyncIterator[tuple[float, dict[str, Any]]]:
    """(receive time as `time.time()`, `data`) of every `next` message on `conn`, until it
    is closed. Raises on a message carrying errors and on the server ending the
    subscription; answers the protocol's pings."""
    async for raw in conn:
        received = time.time()
        message = orjson.loads(raw)
        kind = message.get("type")
        if kind == "next":
            if message["payload"].get("errors"):
                raise RuntimeError(f"subscription delivered errors: {message['payload']}")
            yield received, message["payload"]["data"]
        elif kind == "ping":
            await conn.send(orjson.dumps({"type": "pong"}).decode())
        elif kind in ("error", "complete"):
            raise RuntimeError(f"the server ended the subscription: {message}")
