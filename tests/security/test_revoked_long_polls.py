"""A revoked key gets no job through a claim that was already waiting (a long poll): the
waiting claim ends with UNAUTHENTICATED as soon as the revocation is heard of, and a job
enqueued after it stays PENDING, over HTTP and both WebSocket subprotocols, on both backends.

Revoked by the same server (`revokeApiKey`), by another replica of the same database
(PostgreSQL: heard through NOTIFY), or by `queuelog keys revoke` beside a SQLite server, where
nothing tells the server: there the waiting claim must still get nothing, the enqueue's
hand-off checking the key in its own transaction."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx

from tests.security.ws import PROTOCOLS, Socket, acknowledged, errors_of
from tests.subscriptions.conftest import cli
from tests.support import ADMIN_SECRET, LiveServer, key_refused

CLAIM = """mutation($t: [String!], $w: Int) {
  claimJob(types: $t, waitSeconds: $w) { job { id } userErrors { code } } }"""
ENQUEUE = "mutation($t: String!) { enqueueJob(input: {type: $t}) { job { id } } }"
STATUS = "query($id: ID!) { job(id: $id) { status workerId } }"
REVOKE = "mutation($n: String!) { revokeApiKey(name: $n) }"
WAIT = 50  # the claims' waitSeconds: far longer than any answer the tests accept
REACH = 20.0  # how long an answer may take on a loaded machine


def _unauthenticated(body: dict[str, Any]) -> bool:
    codes = [(e.get("extensions") or {}).get("code") for e in body.get("errors") or []]
    return codes == ["UNAUTHENTICATED"] and not (body.get("data") or {}).get("claimJob")


async def _http_claim(server: LiveServer, key: str, job_type: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(headers=headers, timeout=WAIT + 30) as http:
        body = {"query": CLAIM, "variables": {"t": [job_type], "w": WAIT}}
        return dict((await http.post(server.url, json=body)).json())


async def _ws_claim(socket: Socket, job_type: str) -> list[dict[str, Any]]:
    return await socket.operation(CLAIM, {"t": [job_type], "w": WAIT})


async def _waiting(server: LiveServer, key: str, job_type: str) -> list[asyncio.Task[Any]]:
    """A claim waiting over HTTP; the caller adds its WebSocket ones."""
    task = asyncio.create_task(_http_claim(server, key, job_type))
    await asyncio.sleep(1.0)  # it has arrived, found nothing, and waits
    assert not task.done(), task.result()
    return [task]


async def _ended_unauthenticated(tasks: list[asyncio.Task[Any]]) -> None:
    async with asyncio.timeout(REACH):
        answers = await asyncio.gather(*tasks)
    for answer in answers:
        if isinstance(answer, list):  # a WebSocket operation's messages
            codes = [(e.get("extensions") or {}).get("code") for e in errors_of(answer)]
            assert codes == ["UNAUTHENTICATED"], answer
            assert "revoked" in errors_of(answer)[0]["message"]
        else:
            assert _unauthenticated(answer), answer


def _still_pending(server: LiveServer, job_id: str) -> None:
    assert server.gql(STATUS, {"id": job_id}, ADMIN_SECRET)["job"] == {
        "status": "PENDING",
        "workerId": None,
    }


async def _claims_over_every_transport(
    server: LiveServer, key: str, job_type: str, revoke: Callable[[], None]
) -> None:
    async with (
        acknowledged(server, PROTOCOLS[0], key) as first,
        acknowledged(server, PROTOCOLS[1], key) as second,
    ):
        tasks = await _waiting(server, key, job_type)
        tasks += [asyncio.create_task(_ws_claim(s, job_type)) for s in (first, second)]
        await asyncio.sleep(1.0)
        assert not any(t.done() for t in tasks)
        revoke()
        await _ended_unauthenticated(tasks)


async def test_a_revocation_ends_the_keys_waiting_claims_at_once(
    server: LiveServer, job_type: str
) -> None:
    name = server.unique_name("long-poller")
    key = server.create_key("WORKER", [job_type], name=name)
    producer = server.create_key("PRODUCER", [job_type])

    def revoke() -> None:
        assert server.gql(REVOKE, {"n": name}, ADMIN_SECRET) == {"revokeApiKey": True}

    await _claims_over_every_transport(server, key, job_type, revoke)
    job_id = server.gql(ENQUEUE, {"t": job_type}, producer)["enqueueJob"]["job"]["id"]
    await asyncio.sleep(0.5)  # a waiter left behind would have taken it by now
    _still_pending(server, job_id)


async def test_a_revocation_by_another_process_gives_a_waiting_claim_nothing(
    server: LiveServer, sibling: LiveServer, job_type: str
) -> None:
    """PostgreSQL: another replica revokes, and this one ends the waiting claims on its
    NOTIFY. SQLite: the command line revokes and nothing tells the server; once a request
    with the key is refused, an enqueue's hand-off gives the waiting claim nothing."""
    name = server.unique_name("long-poller")
    key = server.create_key("WORKER", [job_type], name=name)
    producer = server.create_key("PRODUCER", [job_type])
    if server.db_url.startswith("postgresql"):

        def revoke() -> None:
            assert sibling.gql(REVOKE, {"n": name}, ADMIN_SECRET) == {"revokeApiKey": True}

        await _claims_over_every_transport(server, key, job_type, revoke)
        job_id = server.gql(ENQUEUE, {"t": job_type}, producer)["enqueueJob"]["job"]["id"]
        await asyncio.sleep(0.5)
        _still_pending(server, job_id)
        return
    async with (
        acknowledged(server, PROTOCOLS[0], key) as first,
        acknowledged(server, PROTOCOLS[1], key) as second,
    ):
        tasks = await _waiting(server, key, job_type)
        tasks += [asyncio.create_task(_ws_claim(s, job_type)) for s in (first, second)]
        await asyncio.sleep(1.0)
        cli(server, "keys", "revoke", name)
        for _ in range(int(REACH * 10)):  # the key cache's bound
            if key_refused(server.post("{ viewer { name } }", key=key)):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the revoked key is still accepted")
        job_id = server.gql(ENQUEUE, {"t": job_type}, producer)["enqueueJob"]["job"]["id"]
        await _ended_unauthenticated(tasks)
    _still_pending(server, job_id)
