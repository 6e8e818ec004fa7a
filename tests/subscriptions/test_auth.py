"""Who may subscribe, and to what; revoked keys' subscriptions end."""

from __future__ import annotations

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.subscriptions.conftest import cli
from tests.subscriptions.wsclient import PROTOCOL, WS, claim, complete, enqueue, ws
from tests.support import ADMIN_SECRET, LiveServer, key_refused


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ({}, "a live API key is required"),
        ({"x": 1}, "a live API key is required"),
        ({"authorization": "Bearer ql_not_a_key"}, "invalid or revoked API key"),
        ({"authorization": "Bearer qlk_not_a_key"}, "not a queuelog API key"),
        ({"authorization": "Basic abc"}, "must be 'Bearer <api key>'"),
    ],
)
async def test_connection_init_without_a_live_key_closes_4401_saying_why(
    server: LiveServer, payload: dict[str, object], reason: str
) -> None:
    """4401, which graphql-ws clients do not retry, and a reason as precise as HTTP's."""
    async with connect(server.ws_url, subprotocols=[PROTOCOL]) as conn:  # type: ignore[list-item]
        await WS(conn).send({"type": "connection_init", "payload": payload})
        with pytest.raises(ConnectionClosed) as closed:
            await conn.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
    assert reason in closed.value.rcvd.reason


async def test_subscribers_get_only_events_of_jobs_they_may_read(
    server: LiveServer, job_type: str
) -> None:
    mine = server.create_key("PRODUCER", [job_type])
    theirs = server.create_key("PRODUCER", [job_type])
    w1 = server.create_key("WORKER", [job_type])
    w2 = server.create_key("WORKER", [job_type])
    a, start = enqueue(server, mine, job_type)
    b, _ = enqueue(server, theirs, job_type)
    end, _ = enqueue(server, mine, job_type)  # the last event everyone may see ...
    assert claim(server, w1, job_type) == a
    assert claim(server, w2, job_type) == b
    complete(server, w1, a)
    assert claim(server, w2, job_type) == end
    complete(server, w2, b)
    complete(server, w2, end)  # ... bar w1, whose last event is a's completion

    async def seen(key: str, last: tuple[str, str]) -> list[tuple[str, str]]:
        async with ws(server, key) as client:
            op = await client.subscribe({"type": job_type, "after": start})
            got: list[tuple[str, str]] = []
            while not got or got[-1] != last:
                e = await client.event(op)
                got.append((e["job"]["id"], e["status"]))
            return got

    assert await seen(mine, (end, "COMPLETED")) == [
        (end, "PENDING"),
        (a, "RUNNING"),
        (a, "COMPLETED"),
        (end, "RUNNING"),
        (end, "COMPLETED"),
    ]
    assert await seen(theirs, (b, "COMPLETED")) == [
        (b, "PENDING"),
        (b, "RUNNING"),
        (b, "COMPLETED"),
    ]
    assert await seen(w1, (a, "COMPLETED")) == [(a, "RUNNING"), (a, "COMPLETED")]
    assert await seen(w2, (end, "COMPLETED")) == [
        (b, "RUNNING"),
        (end, "RUNNING"),
        (b, "COMPLETED"),
        (end, "COMPLETED"),
    ]
    everything = await seen(ADMIN_SECRET, (end, "COMPLETED"))
    assert len(everything) == 8


async def test_revoking_a_key_ends_its_subscriptions_at_once(
    server: LiveServer, job_type: str
) -> None:
    name = server.unique_name("doomed")
    key = server.create_key("PRODUCER", [job_type], name=name)
    async with ws(server, key) as client:
        op = await client.subscribe({"type": job_type})
        revoked = server.gql(
            "mutation($n: String!) { revokeApiKey(name: $n) }", {"n": name}, ADMIN_SECRET
        )
        assert revoked == {"revokeApiKey": True}
        assert (await client.error(op))["extensions"]["code"] == "UNAUTHENTICATED"
        # Nothing more runs on that connection, and HTTP refuses the key too.
        again = await client.subscribe({"type": job_type})
        assert (await client.error(again))["extensions"]["code"] == "UNAUTHENTICATED"
    assert key_refused(server.post("{ viewer { name } }", key=key))


async def test_a_key_revoked_by_another_process_ends_its_subscriptions(
    quick: LiveServer, job_type: str
) -> None:
    name = quick.unique_name("doomed")
    key = quick.create_key("PRODUCER", [job_type], name=name)
    async with ws(quick, key) as client:
        op = await client.subscribe({"type": job_type})
        cli(quick, "keys", "revoke", name)  # the server hears nothing: it re-checks the key
        assert (await client.error(op))["extensions"]["code"] == "UNAUTHENTICATED"
