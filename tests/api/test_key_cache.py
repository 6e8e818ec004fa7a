"""Verified keys are cached briefly; a revocation still takes effect at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from queuelog.auth.keys import KeyStore
from queuelog.runtime import Services
from queuelog.service.models import Role
from queuelog.storage import keys as keys_sql
from tests.support import ADMIN_SECRET, LiveServer, key_refused


async def test_a_verified_key_is_cached_and_a_revocation_drops_it(services: Services) -> None:
    keys = KeyStore(services.db, ["email"], cache_seconds=60)
    _, secret = await keys.create("cached", Role.PRODUCER)
    assert (await keys.verify(secret)) is not None
    # Revoked behind the store's back (another process on SQLite): the cache still answers...
    await services.db.write(keys_sql.revoke, "cached", datetime.now(UTC))
    assert (await keys.verify(secret)) is not None
    keys.forget()
    assert (await keys.verify(secret)) is None


async def test_revoking_through_the_store_is_at_once(services: Services) -> None:
    keys = KeyStore(services.db, ["email"], cache_seconds=60)
    _, secret = await keys.create("revoked-now", Role.WORKER)
    assert (await keys.verify(secret)) is not None
    assert await keys.revoke("revoked-now")
    assert (await keys.verify(secret)) is None


async def test_cache_off_looks_up_every_time(services: Services) -> None:
    keys = KeyStore(services.db, ["email"], cache_seconds=0)
    _, secret = await keys.create("uncached", Role.WORKER)
    assert (await keys.verify(secret)) is not None
    await services.db.write(keys_sql.revoke, "uncached", datetime.now(UTC))
    assert (await keys.verify(secret)) is None


class CountedLookups:
    """Counts the store's key lookups; while `held`, each waits for `release` once read."""

    def __init__(self, services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        self.read = asyncio.Event()  # set once a lookup has read the key
        self.gate: asyncio.Event | None = None
        real = services.db.read

        async def read(fn: Callable[..., Any], *a: Any, **k: Any) -> Any:
            result = await real(fn, *a, **k)
            if fn is keys_sql.by_hash:
                self.count += 1
                self.read.set()
                if self.gate is not None:
                    await self.gate.wait()
            return result

        monkeypatch.setattr(services.db, "read", read)


async def _counted_store(
    services: Services, monkeypatch: pytest.MonkeyPatch, name: str, *, held: bool = False
) -> tuple[KeyStore, str, CountedLookups]:
    """A store, the secret of a new key in it, and its lookups counted (held if `held`)."""
    keys = KeyStore(services.db, ["email"], cache_seconds=60)
    _, secret = await keys.create(name, Role.WORKER)
    lookups = CountedLookups(services, monkeypatch)
    if held:
        lookups.gate = asyncio.Event()
    return keys, secret, lookups


async def test_requests_that_miss_together_share_one_lookup(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys, secret, lookups = await _counted_store(services, monkeypatch, "busy")
    found = await asyncio.gather(*(keys.verify(secret) for _ in range(200)))
    assert {key.name for key in found if key is not None} == {"busy"}
    assert None not in found
    assert lookups.count == 1


async def test_a_lookup_begun_before_a_revocation_is_not_shared_after_it(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys, secret, lookups = await _counted_store(
        services, monkeypatch, "revoked-meanwhile", held=True
    )
    assert lookups.gate is not None
    before = asyncio.create_task(keys.verify(secret))
    await asyncio.wait_for(lookups.read.wait(), 5)  # it read the live key and is held
    assert await keys.revoke("revoked-meanwhile")
    lookups.gate.set()
    assert (await keys.verify(secret)) is None  # a lookup of its own, after the revocation
    assert lookups.count == 2
    assert (await before) is not None  # it asked before the revocation
    assert (await keys.verify(secret)) is None  # and what it read was not cached


async def test_a_caller_that_leaves_does_not_cancel_the_shared_lookup(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys, secret, lookups = await _counted_store(services, monkeypatch, "left", held=True)
    assert lookups.gate is not None
    leaving = asyncio.create_task(keys.verify(secret))
    staying = asyncio.create_task(keys.verify(secret))
    await asyncio.wait_for(lookups.read.wait(), 5)
    leaving.cancel()
    lookups.gate.set()
    assert (await staying) is not None
    assert leaving.cancelled()
    assert lookups.count == 1


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_revocation_on_one_replica_reaches_the_others_at_once(
    start_server: Callable[..., LiveServer],
) -> None:
    """Two servers on one PostgreSQL database with a long key cache: the NOTIFY of the
    revocation, not the cache's expiry, makes the other replica refuse the key."""
    a = start_server(key_cache_seconds=60)
    b = start_server(key_cache_seconds=60)
    secret = a.create_key("PRODUCER", name="replicated")
    assert b.post("{ viewer { name } }", key=secret).status_code == 200  # now cached
    a.gql('mutation { revokeApiKey(name: "replicated") }', key=ADMIN_SECRET)
    deadline = time.monotonic() + 5
    while not key_refused(b.post("{ viewer { name } }", key=secret)):
        assert time.monotonic() < deadline, "replica b still accepts the revoked key"
        time.sleep(0.05)
