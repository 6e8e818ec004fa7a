"""Key format: `qlk_`, 256 random bits and a CRC32 checksum. A key failing its checksum is
refused without a database lookup; keys of the earlier `ql_` format still verify."""

from __future__ import annotations

from typing import Any

import pytest

from queuelog.auth.backend import ApiKeyBackend, InvalidKey, TooManyFailures
from queuelog.auth.keys import KeyStore, generate_secret, well_formed
from queuelog.auth.ratelimit import TokenBuckets
from queuelog.runtime import Services
from queuelog.service.models import Role


def test_generated_keys_are_well_formed_and_a_changed_character_is_not() -> None:
    secrets = {generate_secret() for _ in range(200)}
    assert len(secrets) == 200
    for secret in secrets:
        assert secret.startswith("qlk_") and len(secret) == 53 and well_formed(secret)
        for i in (4, 30, 52):
            flipped = "0" if secret[i] != "0" else "1"
            assert not well_formed(secret[:i] + flipped + secret[i + 1 :])
    assert not well_formed("qlk_" + "A" * 49)
    assert not well_formed("Bearer xyz") and not well_formed("ql_" + "x" * 300)
    assert well_formed("ql_test_admin_secret_0123456789abcdef")  # the earlier format


async def test_garbage_is_refused_without_a_lookup(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = KeyStore(services.db, ["email"], cache_seconds=0)
    _, secret = await keys.create("checksummed", Role.PRODUCER)
    legacy_secret = "ql_legacy_format_secret_0123456789abcdef"
    await keys.create("legacy", Role.WORKER, secret=legacy_secret)
    assert (await keys.verify(secret)) is not None
    assert (await keys.verify(legacy_secret)) is not None

    lookups: list[Any] = []
    read = services.db.read

    async def counted(*args: Any) -> Any:
        lookups.append(args)
        return await read(*args)

    monkeypatch.setattr(services.db, "read", counted)
    typo = secret[:-1] + ("y" if secret.endswith("x") else "x")  # never the secret itself
    for garbage in (typo, "qlk_" + "A" * 49, "hunter2", "qlk_" + secret[4:40]):
        assert (await keys.verify(garbage)) is None
    assert lookups == []
    assert (await keys.verify(generate_secret())) is None  # well formed: looked up
    assert len(lookups) == 1


async def test_a_live_key_passes_an_address_out_of_failures(services: Services) -> None:
    """The failure limiter refuses failures only: a live key from the same address works."""
    keys = KeyStore(services.db, ["email"], cache_seconds=0)
    _, secret = await keys.create("behind-a-nat", Role.PRODUCER)
    backend = ApiKeyBackend(keys, TokenBuckets(rate=1 / 3600, burst=2))
    for _ in range(2):
        with pytest.raises(InvalidKey):
            await backend.verify(generate_secret(), "10.0.0.1")
    with pytest.raises(TooManyFailures):
        await backend.verify("qlk_typo", "10.0.0.1")
    assert (await backend.verify(secret, "10.0.0.1")).name == "behind-a-nat"
