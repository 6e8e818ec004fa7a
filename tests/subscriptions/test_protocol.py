"""graphql-transport-ws edge cases, keep-alive, limits, retention and shutdown."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.subscriptions.conftest import cli
from tests.subscriptions.wsclient import PROTOCOL, claim, complete, enqueue, history, ws
from tests.support import LiveServer

EVENTS_QUERY = "subscription { jobStatusChanged { cursor } }"


async def test_no_connection_init_closes_4408(quick: LiveServer) -> None:
    async with connect(quick.ws_url, subprotocols=[PROTOCOL]) as conn:  # type: ignore[list-item]
        with pytest.raises(ConnectionClosed) as closed:
            await conn.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4408


async def test_duplicate_subscription_id_closes_4409(quick: LiveServer, job_type: str) -> None:
    key = quick.create_key("PRODUCER", [job_type])
    async with ws(quick, key) as client:
        await client.send({"id": "x", "type": "subscribe", "payload": {"query": EVENTS_QUERY}})
        await client.send({"id": "x", "type": "subscribe", "payload": {"query": EVENTS_QUERY}})
        with pytest.raises(ConnectionClosed) as closed:
            await client.receive()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4409


async def test_subscriptions_per_connection_are_limited(quick: LiveServer, job_type: str) -> None:
    key = quick.create_key("PRODUCER", [job_type])
    async with ws(quick, key) as client:
        for _ in range(3):  # QUEUELOG_MAX_SUBSCRIPTIONS_PER_CONNECTION
            await client.subscribe({"type": job_type})
        op = await client.subscribe({"type": job_type})
        assert "limit" in (await client.error(op))["message"]


async def test_idle_connections_get_keep_alive_pings(quick: LiveServer, job_type: str) -> None:
    pings: list[str] = []
    three = asyncio.Event()

    class Frames(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("< PING"):
                pings.append(record.getMessage())
                if len(pings) >= 3:
                    three.set()

    log = logging.getLogger("tests.ws.frames")
    log.setLevel(logging.DEBUG)
    log.addHandler(Frames())
    log.propagate = False
    key = quick.create_key("PRODUCER", [job_type])
    async with ws(quick, key, logger=log) as client:
        op = await client.subscribe({"type": job_type})
        await asyncio.wait_for(three.wait(), 15)  # pinged every 0.2 s while idle
        enqueue(quick, key, job_type)
        assert (await client.event(op))["status"] == "PENDING"  # still alive and well


async def test_a_cursor_older_than_retention_is_expired(quick: LiveServer, job_type: str) -> None:
    producer = quick.create_key("PRODUCER", [job_type])
    worker = quick.create_key("WORKER", [job_type])
    _, old = enqueue(quick, producer, job_type)
    job_id = claim(quick, worker, job_type)
    complete(quick, worker, job_id)
    newest = history(quick, producer, job_id)[-1]
    # Retention, run by another process, deletes the finished job and its events.
    pruned = cli(quick, "prune", QUEUELOG_RETENTION_COMPLETED_DAYS="0")
    assert int(re.search(r"deleted (\d+) completed", pruned).group(1)) >= 1  # type: ignore[union-attr]

    async with ws(quick, producer) as client:
        op = await client.subscribe({"type": job_type, "after": old})
        error = await client.error(op)
        assert error["extensions"]["code"] == "CURSOR_EXPIRED", error
        # From the newest pruned event on, nothing is missing.
        op = await client.subscribe({"type": job_type, "after": newest})
        fresh, _ = enqueue(quick, producer, job_type)
        assert (await client.event(op))["job"]["id"] == fresh


async def test_shutdown_closes_sockets_with_1012_so_clients_resubscribe(
    quick: LiveServer, job_type: str
) -> None:
    """A deploy's SIGTERM closes each socket with 1012 (service restart), on which graphql-ws,
    Apollo and urql reconnect; a `complete` would end their subscriptions for good."""
    key = quick.create_key("PRODUCER", [job_type])
    other = quick.sibling().start()
    try:
        _, start = enqueue(other, key, job_type)
        async with ws(other, key) as client:
            ops = {await client.subscribe({"type": job_type, "after": start}) for _ in range(2)}
            enqueue(other, key, job_type)
            assert {m["id"] for m in await client.take(2)} == ops  # both are live
            other.stop()  # SIGTERM
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    message = await client.receive()
                    assert message["type"] != "complete", message
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
    finally:
        other.stop()
