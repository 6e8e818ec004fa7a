"""Rate limits: a token bucket per API key, and per client address for failed logins."""

from __future__ import annotations

import asyncio
import time

import orjson
import websockets

from queuelog.auth.ratelimit import RateLimited, TokenBuckets
from tests.security.http import send
from tests.support import LiveServer


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
    other = limited.create_key("PRODUCER", name=limited.unique_name("calm"))
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


def test_brute_forced_keys_are_rate_limited_per_address(limited: LiveServer) -> None:
    good = limited.create_key("PRODUCER", name=limited.unique_name("victim"))
    attacker = {"X-Forwarded-For": "203.0.113.7"}  # uvicorn trusts it from 127.0.0.1
    guesses = [
        send(limited, "{ viewer { name } }", key=f"ql_guess{i}", headers=attacker).status_code
        for i in range(5)
    ]
    assert guesses == [401, 401, 401, 429, 429]
    locked_out = send(limited, "{ viewer { name } }", key=good, headers=attacker)
    assert locked_out.status_code == 429  # even a right guess is not even looked at
    assert locked_out.json()["errors"][0]["extensions"]["code"] == "RATE_LIMITED"
    assert int(locked_out.headers["retry-after"]) > 1
    elsewhere = {"X-Forwarded-For": "198.51.100.9"}
    assert send(limited, "{ viewer { name } }", key=good, headers=elsewhere).status_code == 200


def test_brute_force_over_websocket_is_rate_limited(limited: LiveServer) -> None:
    """Failed connection_inits spend the same per-address bucket as failed HTTP logins."""
    good = limited.create_key("PRODUCER", name=limited.unique_name("ws-victim"))

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
                return f"closed {closed.rcvd.code if closed.rcvd else None}"

    attacker = "192.0.2.44"
    assert [asyncio.run(attempt(f"ql_guess{i}", attacker)) for i in range(3)] == ["closed 4403"] * 3
    assert asyncio.run(attempt(good, attacker)) == "closed 4403"  # locked out
    over_http = send(
        limited, "{ viewer { name } }", key=good, headers={"X-Forwarded-For": attacker}
    )
    assert over_http.status_code == 429
    assert asyncio.run(attempt(good, "192.0.2.45")) == "connection_ack"


def test_websocket_operations_spend_the_keys_bucket(limited: LiveServer) -> None:
    """A WebSocket connection cannot escape the per-key limit: each operation spends a token
    of the same bucket as HTTP requests (burst 4 here), and one over it gets RATE_LIMITED."""
    key = limited.create_key("PRODUCER", name=limited.unique_name("ws-flood"))
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
