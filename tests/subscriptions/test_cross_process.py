"""Two `queuelog serve` processes on one database see each other's changes (PostgreSQL:
LISTEN/NOTIFY with polling behind it; SQLite: polling)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.subscriptions.wsclient import claim, complete, enqueue, ws
from tests.support import ADMIN_SECRET, LiveServer


@pytest.fixture
def pair(start_server: Callable[..., LiveServer]) -> tuple[LiveServer, LiveServer]:
    return start_server(), start_server()


async def test_two_servers_see_each_other_s_changes(pair: tuple[LiveServer, LiveServer]) -> None:
    a, b = pair
    producer = a.create_key("PRODUCER", ["email"])
    worker = a.create_key("WORKER", ["email"])
    _, start = enqueue(a, producer, "email")
    async with ws(a, ADMIN_SECRET) as on_a, ws(b, ADMIN_SECRET) as on_b:
        op_a = await on_a.subscribe({"after": start})
        op_b = await on_b.subscribe({"after": start})
        job, _ = enqueue(b, producer, "email")  # written by b: a hears it
        claim(a, worker, "email")  # the marker, written by a: b hears it
        assert claim(b, worker, "email") == job
        complete(a, worker, job)
        heard_a = await on_a.events(op_a, 4)
        heard_b = await on_b.events(op_b, 4)
    assert heard_a == heard_b
    assert [(e["job"]["id"], e["status"]) for e in heard_a][-1] == (job, "COMPLETED")
