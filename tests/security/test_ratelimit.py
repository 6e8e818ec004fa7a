"""Rate limits: a token bucket per API key, and per client address for failed logins."""

from __future__ import annotations

import asyncio
import time

import httpx
import orjson
import websockets

from queuelog.auth.ratelimit import RateLimited, TokenBuckets
from tests.security.http import send
from tests.support import GraphQLErrors, LiveServer


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket_refills_at_its_rate() -> None:
    clock = Clock()
    buckets = TokenBuckets(rate=2, burst=3, clock=clock)
    for _ in range(3):
        buckets.take("k")
    try:
        buckets.take("k")
        raise AssertionError("the fourth request within the burst must be refused")
    except RateLimited as exc:
        assert exc.retry_after == 0.5 and exc.header == "1"
    buckets.take("other")  # buckets are per key
    clock.now = 0.5
    buckets.take("k")
    assert buckets.wait("k") == 0.5


def test_disabled_and_bounded() -> None:
    off = TokenBuckets(rate=0, burst=1)
    for _ in range(1_000):
        off.take("k")
    small = TokenBuckets(rate=1, burst=1, max_keys=10)
    for i in range(100):
        small.take(f"k{i}")
    assert len(small._buckets) == 10


def test_per_key_rate_limit_over_http(limited: LiveServer) -> None:
    key = limited.create_key("ADMIN", name=limited.unique_name("busy"))  # spends admin tokens
    other = patiently_create_key(limited, "calm")
    codes = [send(limited, "{ viewer { name } }", key=key).status_code for _ in range(6)]
    assert codes[:4] == [200] * 4 and 429 in codes[4:]
    refused = send(limited, "{ viewer { name } }", key=key)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
    error = refused.json()["errors"][0]
    assert error["extensions"]["code"] == "RATE_LIMITED"
    assert 0 < error["extensions"]["retryAfter"] <= 0.5
    assert send(limited, "{ viewer { name } }", key=other).status_code == 200  # its own bucket
    time.sleep(error["extensions"]["retryAfter"])
    assert send(limited, "{ viewer { name } }", key=key).status_code == 200  # refilled


GRAPHQL_RESPONSE_FIRST = {"Accept": "application/graphql-response+json, application/json;q=0.9"}


def test_failed_logins_are_limited_per_address_but_a_live_key_never_is(
    limited: LiveServer,
) -> None:
    """Behind one address (a NAT, a proxy) someone's wrong keys must not lock out everyone
    else's live keys: failures alone spend the address's bucket."""
    good = patiently_create_key(limited, "victim")
    attacker = {"X-Forwarded-For": "203.0.113.7", **GRAPHQL_RESPONSE_FIRST}
    guesses = [
        send(limited, "{ viewer { name } }", key=f"ql_guess{i}", headers=attacker).status_code
        for i in range(5)
    ]
    assert guesses == [401, 401, 401, 429, 429]
    garbage = send(limited, "{ viewer { name } }", key="qlk_garbage", headers=attacker)
    assert garbage.status_code == 429
    assert garbage.json()["errors"][0]["extensions"]["code"] == "RATE_LIMITED"
    assert int(garbage.headers["retry-after"]) > 1
    same_address = send(limited, "{ viewer { name } }", key=good, headers=attacker)
    assert same_address.status_code == 200
    assert same_address.json() == {"data": {"viewer": {"name": limited_name(same_address)}}}


def limited_name(response: httpx.Response) -> str:
    return str(response.json()["data"]["viewer"]["name"])


def test_a_key_failing_its_checksum_is_refused_without_a_lookup(limited: LiveServer) -> None:
    """Garbage and typos are refused by the key's checksum: the message says so."""
    good = patiently_create_key(limited, "typo")
    typo = good[:-1] + ("A" if good[-1] != "A" else "B")
    refused = send(limited, "{ viewer { name } }", key=typo, headers=GRAPHQL_RESPONSE_FIRST)
    assert refused.status_code in (401, 429)
    if refused.status_code == 401:
        assert "checksum" in refused.json()["errors"][0]["message"]


def test_brute_force_over_websocket_is_rate_limited(limited: LiveServer) -> None:
    """Failed connection_inits spend the same per-address bucket as failed HTTP logins; a
    live key from that address is still accepted, and each refusal says why."""
    good = patiently_create_key(limited, "ws-victim")

    async def attempt(secret: str, address: str) -> str:
        async with websockets.connect(
            limited.ws_url,
            subprotocols=["graphql-transport-ws"],  # type: ignore[list-item]
            additional_headers={"X-Forwarded-For": address},
        ) as ws:
            init = {"type": "connection_init", "payload": {"authorization": f"Bearer {secret}"}}
            await ws.send(orjson.dumps(init).decode())
            try:
                return str(orjson.loads(await ws.recv())["type"])
            except websockets.ConnectionClosed as closed:
                assert closed.rcvd is not None
                return f"closed {closed.rcvd.code} {closed.rcvd.reason}"

    attacker = "192.0.2.44"
    tries = [asyncio.run(attempt(f"ql_guess{i}", attacker)) for i in range(4)]
    assert tries[:3] == ["closed 4401 invalid or revoked API key"] * 3
    assert tries[3].startswith("closed 4401 too many failed attempts to authenticate"), tries
    assert asyncio.run(attempt(good, attacker)) == "connection_ack"
    over_http = send(
        limited, "{ viewer { name } }", key=good, headers={"X-Forwarded-For": attacker}
    )
    assert over_http.status_code == 200


def patiently_create_key(server: LiveServer, name: str) -> str:
    """A new key, waiting as long as the admin key's own bucket asks (other tests spend it)."""
    while True:
        try:
            return server.create_key("PRODUCER", name=server.unique_name(name))
        except GraphQLErrors as exc:
            [error] = exc.args[0]
            assert error["extensions"]["code"] == "RATE_LIMITED", exc
            time.sleep(error["extensions"]["retryAfter"])


def test_requests_without_a_key_are_limited_per_address(limited: LiveServer) -> None:
    """Anonymous requests (introspection, `__typename`) spend a bucket of their address:
    5 here, then 429 before anything parses; a key's requests are not charged to it."""
    key = patiently_create_key(limited, "keyed")
    address = {"X-Forwarded-For": "198.51.100.77"}
    codes = [send(limited, "{ __typename }", headers=address).status_code for _ in range(6)]
    assert codes == [200] * 5 + [429]
    refused = send(limited, "{ __schema { types { name } } }", headers=address)
    assert refused.status_code == 429
    assert refused.json()["errors"][0]["extensions"]["code"] == "RATE_LIMITED"
    assert send(limited, "{ __typename }", key=key, headers=address).status_code == 200
    other = {"X-Forwarded-For": "198.51.100.78"}
    assert send(limited, "{ __typename }", headers=other).status_code == 200


def test_websocket_operations_spend_the_keys_bucket(limited: LiveServer) -> None:
    """A WebSocket connection cannot escape the per-key limit: each operation spends a token
    of the same bucket as HTTP requests (burst 4 here), and one over it gets RATE_LIMITED."""
    key = patiently_create_key(limited, "ws-flood")
    query = 'subscription { jobStatusChanged(type: "email") { status } }'

    async def flood() -> list[dict[str, object]]:
        async with websockets.connect(
            limited.ws_url,
            subprotocols=["graphql-transport-ws"],  # type: ignore[list-item]
        ) as ws:
            init = {"type": "connection_init", "payload": {"authorization": f"Bearer {key}"}}
            await ws.send(orjson.dumps(init).decode())
            assert orjson.loads(await ws.recv())["type"] == "connection_ack"
            for op in range(8):
                message = {"id": str(op), "type": "subscribe", "payload": {"query": query}}
                await ws.send(orjson.dumps(message).decode())
            errors = []
            try:
                async with asyncio.timeout(2):
                    while True:
                        message = orjson.loads(await ws.recv())
                        if message["type"] == "error":
                            errors.append(message)
            except TimeoutError:
                pass
            return errors

    errors = asyncio.run(flood())
    refused = {e["id"] for e in errors}
    assert refused and refused <= {str(op) for op in range(4, 8)}, errors
    [error] = errors[0]["payload"]  # type: ignore[misc]
    assert error["extensions"]["code"] == "RATE_LIMITED"
    assert error["extensions"]["retryAfter"] > 0
