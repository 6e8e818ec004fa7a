"""Idle subscriptions cost nothing per subscription: a `jobProgress` follower sleeps until its
job changes, its key is revoked or the server stops (no timer of its own), and one key may
hold only so many subscriptions open on a server. Over real WebSockets, on both backends."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from queuelog.events import progress
from queuelog.runtime import Services
from tests.inprocess import until
from tests.security.ws import TRANSPORT, Socket, acknowledged, errors_of
from tests.support import LiveServer
from tests.workers.longpoll import post

ENQUEUE = "mutation($t: String!) { enqueueJob(input: {type: $t}) { job { id } } }"
CLAIM = "mutation($t: [String!]) { claimJob(types: $t) { job { id } } }"
HEARTBEAT = """mutation($id: ID!, $p: JSON) {
  heartbeatJob(id: $id, progress: $p) { userErrors { code } } }"""
PROGRESS = "subscription($id: ID!) { jobProgress(jobId: $id) { progress } }"
EVENTS = "subscription { jobStatusChanged { cursor } }"
PER_SOCKET = 40  # under QUEUELOG_MAX_SUBSCRIPTIONS_PER_CONNECTION (50)


async def _running_job(server: LiveServer, key: str, job_type: str) -> str:
    job_id = (await post(server, key, ENQUEUE, t=job_type))["enqueueJob"]["job"]["id"]
    assert (await post(server, key, CLAIM, t=[job_type]))["claimJob"]["job"]["id"] == job_id
    return str(job_id)


async def _subscribe(socket: Socket, op: str, query: str, **variables: Any) -> None:
    await socket.send(socket.start_message(op, {"query": query, "variables": variables}))


@contextlib.asynccontextmanager
async def _sockets(server: LiveServer, key: str, n: int) -> AsyncIterator[list[Socket]]:
    async with contextlib.AsyncExitStack() as stack:
        yield [await stack.enter_async_context(acknowledged(server, TRANSPORT, key))
               for _ in range(n)]  # fmt: skip


async def test_idle_progress_followers_do_not_wake(
    live: tuple[LiveServer, str], services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two hundred followers of a running job with no progress: over three seconds they
    look at their job no more than the reader does (one look a follower a second before);
    a progress report still reaches every one of them."""
    (server, key), n = live, 200
    job_id = await _running_job(server, key, "email")
    looks = 0
    version = progress._version

    def counted(row: Any) -> Any:
        nonlocal looks
        looks += 1
        return version(row)

    monkeypatch.setattr(progress, "_version", counted)
    watch = progress.progress_watch(services.feed)
    async with _sockets(server, key, n // PER_SOCKET) as sockets:
        for i in range(n):
            await _subscribe(sockets[i // PER_SOCKET], f"p{i}", PROGRESS, id=job_id)
        await until(lambda: len(watch._followers.get(int(job_id), ())) == n)
        await asyncio.sleep(0.5)  # each has read its job and gone to sleep
        looks = 0
        await asyncio.sleep(3.0)
        # The reader: two looks a round, ten rounds a second. A timer per follower: 600+.
        assert looks <= 2 * 10 * 3 + 20, looks
        out = await post(server, key, HEARTBEAT, id=job_id, p={"done": 1})
        assert out["heartbeatJob"]["userErrors"] == []
        for socket in sockets:
            for _ in range(PER_SOCKET):
                message = await socket.receive()
                assert message["type"] == "next", message
                assert message["payload"]["data"]["jobProgress"] == {"progress": {"done": 1}}


async def test_a_revocation_ends_idle_progress_followers_at_once(
    server: LiveServer, job_type: str
) -> None:
    worker = server.create_key("WORKER", [job_type])
    name = server.unique_name("watcher")
    watcher = server.create_key("PRODUCER", [job_type], name=name)
    job_id = (await post(server, watcher, ENQUEUE, t=job_type))["enqueueJob"]["job"]["id"]
    assert (await post(server, worker, CLAIM, t=[job_type]))["claimJob"]["job"]["id"] == job_id
    async with acknowledged(server, TRANSPORT, watcher) as socket:
        await _subscribe(socket, "p", PROGRESS, id=job_id)
        await asyncio.sleep(0.5)
        server.gql("mutation($n: String!) { revokeApiKey(name: $n) }", {"n": name},
                   server.admin_key)  # fmt: skip
        message = await socket.receive(wait=15)  # no progress came: the revocation woke it
        codes = [(e.get("extensions") or {}).get("code") for e in errors_of([message])]
        assert codes == ["UNAUTHENTICATED"], message


async def test_a_key_holds_a_bounded_number_of_subscriptions(start_server: Any) -> None:
    server: LiveServer = start_server(max_subscriptions_per_key=3)
    key, other = server.create_key("ADMIN"), server.create_key("ADMIN")
    async with _sockets(server, key, 2) as (first, second), _sockets(server, other, 1) as (third,):
        for socket, op in ((first, "a"), (first, "b"), (second, "c")):
            await _subscribe(socket, op, EVENTS)
        await asyncio.sleep(0.5)  # all three are open
        await _subscribe(second, "d", EVENTS)
        refused = await second.receive()
        assert refused["id"] == "d" and refused["type"] in ("error", "next"), refused
        codes = [(e.get("extensions") or {}).get("code") for e in errors_of([refused])]
        assert codes == ["TOO_MANY_SUBSCRIPTIONS"], refused
        assert "QUEUELOG_MAX_SUBSCRIPTIONS_PER_KEY" in errors_of([refused])[0]["message"]
        await _subscribe(third, "e", EVENTS)  # another key's are counted apart
        await first.send({"id": "a", "type": "complete"})  # one ends: room for one more
        await asyncio.sleep(0.5)
        await _subscribe(second, "f", EVENTS)
        await post(server, server.admin_key, ENQUEUE, t="email")
        for socket, op in ((second, "f"), (third, "e")):
            message = await socket.receive()
            while message.get("id") != op:  # the other open subscriptions' events
                message = await socket.receive()
            assert message["type"] == "next", message
