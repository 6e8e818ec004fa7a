"""Request bodies that stall cost one copy each, and their sum is bounded server-wide: a body
that would take the bodies held past `QUEUELOG_REQUEST_BODIES_MAX_BYTES` is answered 503 at
once. Raw HTTP against a live server (the body is read before any database work)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from tests.support import LiveServer, live_server

MIB = 1024 * 1024
QUERY = b'{"query": "{ __typename }"}'


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@contextlib.asynccontextmanager
async def _stalled(server: LiveServer, length: int, sent: int) -> AsyncIterator[None]:
    """A POST declaring a body of `length` bytes, of which `sent` are sent, then nothing."""
    _reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    head = (
        f"POST /graphql HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\n"
        f"content-length: {length}\r\n\r\n"
    )
    writer.write(head.encode() + b" " * sent)
    await writer.drain()
    try:
        yield
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


async def _post(server: LiveServer, body: bytes) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as http:
        headers = {"content-type": "application/json"}
        return await http.post(server.url, content=body, headers=headers)


def _padded(size: int) -> bytes:
    return QUERY[:-1] + b" " * (size - len(QUERY)) + b"}"


async def test_stalled_bodies_hold_one_copy_each(tmp_path: Path) -> None:
    n = 30  # under the default budget (64 MiB: 32 bodies of the largest size)
    with live_server(
        f"sqlite:///{tmp_path}/q.db", tmp_path, http_request_timeout_seconds=120
    ) as server:
        before = _rss(server.pid)
        async with contextlib.AsyncExitStack() as stack:
            for _ in range(n):
                await stack.enter_async_context(_stalled(server, 2 * MIB, 2 * MIB - 1))
            grown, deadline = 0, time.monotonic() + 60
            while time.monotonic() < deadline:  # until the bytes have all arrived
                await asyncio.sleep(1.0)
                now = _rss(server.pid) - before
                if now >= n * 2 * MIB * 0.9 and now == grown:
                    break
                grown = now
            # Two megabytes each, and some slack; two copies (or one built by `+=`) ~4 MiB.
            assert grown <= n * 3 * MIB, grown / MIB
        assert (await _post(server, QUERY)).status_code == 200


async def test_bodies_past_the_budget_are_refused_with_503_at_once(tmp_path: Path) -> None:
    budget = 3 * MIB + MIB // 2
    settings = {"request_bodies_max_bytes": budget, "http_request_timeout_seconds": 120}
    with live_server(f"sqlite:///{tmp_path}/q.db", tmp_path, **settings) as server:
        async with contextlib.AsyncExitStack() as stack:
            for _ in range(3):  # 3 MiB held by bodies that stall
                await stack.enter_async_context(_stalled(server, MIB, 1000))
            await asyncio.sleep(1.0)
            # One more MiB declared: answered before its body is sent (a client still
            # sending may see the connection closed instead).
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            head = (
                "POST /graphql HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\n"
                f"content-length: {MIB}\r\n\r\n"
            )
            writer.write(head.encode())
            async with asyncio.timeout(10):  # at once, not after a timeout
                refused = await reader.read()
            writer.close()
            assert refused.startswith(b"HTTP/1.1 503 "), refused[:200]
            assert b"retry-after: 1\r\n" in refused.lower()
            assert b'"code":"SERVICE_UNAVAILABLE"' in refused
            small = await _post(server, QUERY)  # what fits in the budget is served
            assert small.status_code == 200 and small.json() == {"data": {"__typename": "Query"}}
        # The stalled clients are gone: their share of the budget is free again.
        for _ in range(100):
            answered = await _post(server, _padded(MIB))
            if answered.status_code == 200:
                break
            await asyncio.sleep(0.2)
        assert answered.status_code == 200, answered.text
