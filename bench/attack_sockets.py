"""Socket-level attacks on a live server, and what they cost everyone else.

Each attack runs for a bounded time against one `queuelog serve` on loopback, while a
bystander sends `{ __typename }` over HTTP; we record the server's RSS, the bystander's
latency and failures, and what the server did with the attacking sockets:

- `init_flood`: legacy `graphql-ws` sockets sending `connection_init` over and over;
- `idle_legacy`: legacy sockets that never send `connection_init`;
- `slow_headers`: HTTP connections sending their request headers a byte at a time;
- `slow_body`: HTTP requests whose body trickles in a byte at a time.

The server runs with short protocol timers (`TIMERS`) so that a run takes under a minute
per backend; the defaults only change how long an attack must wait for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.typing import Subprotocol

from bench.common import ADMIN_SECRET, Server, percentile, rss_bytes

TIMERS = {
    "QUEUELOG_WS_INIT_TIMEOUT_SECONDS": "2",
    "QUEUELOG_HTTP_REQUEST_TIMEOUT_SECONDS": "3",
}
LEGACY = Subprotocol("graphql-ws")
INIT = orjson.dumps(
    {"type": "connection_init", "payload": {"authorization": f"Bearer {ADMIN_SECRET}"}}
).decode()


class Bystander:
    """A client that sends `{ __typename }` every `interval` seconds and times the answers."""

    def __init__(self, url: str, interval: float = 0.02) -> None:
        self.url = url
        self.interval = interval
        self.latencies: list[float] = []
        self.failures = 0

    async def run(self, stop: asyncio.Event) -> None:
        async with httpx.AsyncClient(timeout=10) as client:
            while not stop.is_set():
                began = time.perf_counter()
                try:
                    response = await client.post(self.url, json={"query": "{ __typename }"})
                    if response.status_code != 200:
                        self.failures += 1
                except httpx.HTTPError:
                    self.failures += 1
                self.latencies.append(time.perf_counter() - began)
                await asyncio.sleep(self.interval)

    def summary(self) -> dict[str, Any]:
        ms = [1000 * x for x in self.latencies]
        return {
            "requests": len(ms),
            "failures": self.failures,
            "p50_ms": round(percentile(ms, 50), 1),
            "p99_ms": round(percentile(ms, 99), 1),
            "max_ms": round(max(ms), 1) if ms else float("nan"),
        }


async def _measured(
    server: Server, attack: Callable[[], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    before = rss_bytes(server.pid)
    bystander = Bystander(server.url)
    stop = asyncio.Event()
    watching = asyncio.create_task(bystander.run(stop))
    try:
        outcome = await attack()
    finally:
        peak = rss_bytes(server.pid)
        stop.set()
        await watching
    await asyncio.sleep(1.0)  # the server's clean-up of closed sockets
    return {
        **outcome,
        "rss_before_mib": round(before / 2**20, 1),
        "rss_during_mib": round(peak / 2**20, 1),
        "rss_after_mib": round(rss_bytes(server.pid) / 2**20, 1),
        "bystander": bystander.summary(),
    }


async def _closed_code(conn: ClientConnection, wait: float) -> int | None:
    """The close code the server sent within `wait` seconds (None: still open)."""
    try:
        async with asyncio.timeout(wait):
            while True:
                await conn.recv()
    except ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd else 1006
    except TimeoutError:
        return None


async def init_flood(server: Server, sockets: int, inits: int, seconds: float) -> dict[str, Any]:
    """`inits` connection_init messages in all, over `sockets` concurrent legacy sockets, each
    reconnecting when the server closes it."""
    sent = reconnects = 0
    codes: dict[str, int] = {}
    deadline = time.monotonic() + seconds

    async def one() -> None:
        nonlocal sent, reconnects
        while sent < inits and time.monotonic() < deadline:
            try:
                async with connect(server.ws_url, subprotocols=[LEGACY], max_queue=None) as ws:
                    while sent < inits and time.monotonic() < deadline:
                        await ws.send(INIT)
                        sent += 1
                        if sent % 100 == 0:
                            await asyncio.sleep(0)
            except ConnectionClosed as closed:
                code = str(closed.rcvd.code if closed.rcvd else 1006)
                codes[code] = codes.get(code, 0) + 1
                reconnects += 1
            except (OSError, InvalidHandshake):
                reconnects += 1
                await asyncio.sleep(0.05)

    began = time.monotonic()
    await asyncio.gather(*(one() for _ in range(sockets)))
    return {
        "inits_sent": sent,
        "seconds": round(time.monotonic() - began, 1),
        "reconnects": reconnects,
        "close_codes": codes,
    }


async def idle_legacy(server: Server, sockets: int, hold: float) -> dict[str, Any]:
    """`sockets` legacy sockets that never authenticate: how many the server still holds
    after `hold` seconds."""
    conns: list[ClientConnection] = []
    refused = 0
    for _ in range(sockets):
        try:
            conns.append(await connect(server.ws_url, subprotocols=[LEGACY]))
        except (OSError, InvalidHandshake):
            refused += 1
    codes = await asyncio.gather(*(_closed_code(c, hold) for c in conns))
    for conn in conns:
        await conn.close()
    closed: dict[str, int] = {}
    for code in codes:
        closed[str(code)] = closed.get(str(code), 0) + 1
    return {"sockets": sockets, "refused": refused, "after_hold": closed}


async def _trickle(port: int, head: bytes, body: bytes, seconds: float) -> str:
    """Send `head` at once, then `body` a byte every half second: 'cut' when the server
    closes the connection within `seconds`, 'answered' on a response, 'held' otherwise."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return "refused"
    deadline = time.monotonic() + seconds
    try:
        writer.write(head)
        for byte in body:
            if time.monotonic() >= deadline:
                return "held"
            writer.write(bytes([byte]))
            await writer.drain()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.5):
                    got = await reader.read(1)
                    return "answered" if got else "cut"
        return "held"
    except (ConnectionError, OSError):
        return "cut"
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


async def slow_requests(
    server: Server, connections: int, seconds: float, in_body: bool
) -> dict[str, Any]:
    request = b'{"query": "{ __typename }"}' + b" " * 200
    head = (
        b"POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(request)).encode() + b"\r\n\r\n"
    )
    first, rest = (head, request) if in_body else (b"", head + b" " * 400)
    outcomes = await asyncio.gather(
        *(_trickle(server.port, first, rest, seconds) for _ in range(connections))
    )
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome] = counts.get(outcome, 0) + 1
    return {"connections": connections, "seconds": seconds, "outcomes": counts}


async def run(
    db_url: str, workdir: Path, scale: float = 1.0, duration: float = 1.0
) -> dict[str, Any]:
    """Every attack once against a fresh server on `db_url`; `scale` shrinks the counts and
    `duration` the time each attack runs."""
    server = Server(db_url, workdir)
    server.env_extra.update(TIMERS)
    with server:
        attacks: dict[str, Callable[[], Awaitable[dict[str, Any]]]] = {
            "init_flood": lambda: init_flood(server, 8, int(100_000 * scale), 10.0 * duration),
            "idle_legacy": lambda: idle_legacy(server, int(500 * scale), 5.0 * duration),
            "slow_headers": lambda: slow_requests(server, int(300 * scale), 8.0 * duration, False),
            "slow_body": lambda: slow_requests(server, int(300 * scale), 8.0 * duration, True),
        }
        results: dict[str, Any] = {
            name: await _measured(server, attack) for name, attack in attacks.items()
        }
        results["server_log_lines"] = len(server.log().splitlines())
        results["server_log_tracebacks"] = server.log().count("Traceback")
    return results


if __name__ == "__main__":  # python -m bench.attack_sockets [sqlite|postgresql]
    import json
    import sys
    import tempfile

    from bench.common import database_url

    backend = sys.argv[1] if len(sys.argv) > 1 else "sqlite"
    with tempfile.TemporaryDirectory() as tmp, database_url(backend, Path(tmp)) as url:
        print(json.dumps(asyncio.run(run(url, Path(tmp))), indent=2))
