"""`live`: a `queuelog` server in the test's own process (uvicorn on a real port) on the
test's `settings` and `services`, so that a test can count what the server does, or move its
clock, while real HTTP and WebSocket clients talk to it. A pytest plugin of the root
`conftest`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
import uvicorn

from queuelog.config import Settings
from queuelog.edge.app import create_app
from queuelog.runtime import Services
from queuelog.service.models import Priority, Role
from tests.support import LiveServer, free_port


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(600):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("timed out")


@pytest.fixture
async def live(settings: Settings, services: Services) -> AsyncIterator[tuple[LiveServer, str]]:
    """The server on `services`, and an admin key's secret."""
    _, secret = await services.keys.create("admin", Role.ADMIN, None, Priority.CRITICAL)
    port = free_port()
    config = uvicorn.Config(create_app(settings, services), port=port, log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    await until(lambda: server.started)
    yield (
        LiveServer(settings.database_url, workdir=None, port=port, admin_key=secret),  # type: ignore[arg-type]
        secret,
    )
    server.should_exit = True
    await task
