"""Opening and dropping 1,000 subscriptions leaks no task and no memory.

The server runs in this process (uvicorn on a real port) so that its tasks and memory can be
counted; the clients are real WebSocket connections, half closed politely and half simply
vanishing (their TCP connection aborted).
"""

from __future__ import annotations

import asyncio
import gc
import os
from contextlib import AsyncExitStack

from queuelog.runtime import Services
from queuelog.service.models import Actor, EnqueueRequest, Role
from tests.inprocess import until
from tests.subscriptions.wsclient import WS, ws
from tests.support import LiveServer

CONNECTIONS, PER_CONNECTION = 20, 50  # 1,000 subscriptions
PRODUCER = Actor("p", Role.PRODUCER)


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def one_round(server: LiveServer, key: str, services: Services) -> None:
    async with AsyncExitStack() as stack:
        clients: list[WS] = []
        for _ in range(CONNECTIONS):
            clients.append(await stack.enter_async_context(ws(server, key)))
        ops = [
            [await c.subscribe({"type": "email"}) for _ in range(PER_CONNECTION)] for c in clients
        ]
        await until(lambda: services.feed.followers == CONNECTIONS * PER_CONNECTION)
        await services.service.enqueue(PRODUCER, EnqueueRequest("email"))
        for client, mine in zip(clients, ops, strict=True):  # every subscription is live
            assert sorted(m["id"] for m in await client.take(PER_CONNECTION)) == sorted(mine)
        for client in clients[::2]:  # these vanish; the others close politely on exit
            client.conn.transport.abort()


async def settle(services: Services, tasks: int) -> int:
    for _ in range(200):
        gc.collect()
        now = len(asyncio.all_tasks())
        if services.feed.followers == 0 and now <= tasks:
            return now
        await asyncio.sleep(0.05)
    return len(asyncio.all_tasks())


async def test_a_thousand_dropped_subscriptions_leak_nothing(
    live: tuple[LiveServer, str], services: Services
) -> None:
    server, key = live
    await one_round(server, key, services)  # warm-up: caches, pools, allocator arenas
    tasks = await settle(services, 10**6)
    rss = rss_mb()
    await one_round(server, key, services)
    assert await settle(services, tasks) == tasks
    assert services.feed.followers == 0
    assert rss_mb() - rss < 16, (rss, rss_mb())
