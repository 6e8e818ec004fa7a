"""API keys: random secrets shown once, stored only as SHA-256 hashes.

A key reads `qlk_` + 43 random base62 characters (256 bits) + a 6-character base62 CRC32 of
them, like GitHub's tokens: a scanner can recognise a leaked key, and a typo or a guess is
refused by its checksum without a database lookup. Keys made before this format (`ql_` and
then any random text, as `QUEUELOG_ADMIN_KEY` still takes them) keep working: they are
looked up by hash."""

from __future__ import annotations

import functools
import hashlib
import hmac
import time
from collections.abc import Sequence
from datetime import UTC, datetime

import orjson
from sqlalchemy.exc import IntegrityError

# Re-exported: the key's format lives in the domain, where the settings read it too.
from queuelog.domain.key_format import generate_secret as generate_secret
from queuelog.domain.key_format import well_formed as well_formed
from queuelog.service import errors
from queuelog.service.models import PRODUCER_PREFIX, ApiKey, Priority, Role
from queuelog.singleflight import SingleFlight
from queuelog.storage import keys as keys_sql
from queuelog.storage.db import Database

NAME_MAX = 128


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _check_name(name: str) -> str:
    if name.startswith(PRODUCER_PREFIX):  # schedules enqueue under these names
        raise errors.ValidationFailed(
            f"names starting with {PRODUCER_PREFIX!r} belong to schedules", ["input", "name"]
        )
    if not 1 <= len(name) <= NAME_MAX or not name.isprintable() or name != name.strip():
        raise errors.ValidationFailed(
            f"name must be 1 to {NAME_MAX} printable characters without surrounding spaces",
            ["input", "name"],
        )
    return name


class KeyStore:
    """API keys, with live keys remembered for `cache_seconds` (0: not at all).

    Looking a key up cost a thread hop and a transaction per request, as much CPU as the
    rest of an enqueue. A revocation drops the key from this process's cache at once; on
    PostgreSQL every replica drops its cache on the revocation's NOTIFY; a revocation from
    another process on SQLite (`queuelog keys revoke`) takes effect within `cache_seconds`.
    """

    CACHE_MAX = 10_000

    def __init__(self, db: Database, job_types: Sequence[str], cache_seconds: float = 1.0) -> None:
        self.db = db
        self.job_types = tuple(job_types)
        self.cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, ApiKey]] = {}
        self._generation = 0  # bumped by forget(): a lookup begun before it is not cached
        self._lookups: SingleFlight[str, ApiKey | None] = SingleFlight()

    async def verify(self, secret: str) -> ApiKey | None:
        """The live key whose secret this is, or None."""
        if not well_formed(secret):
            return None
        digest = hash_secret(secret)
        hit = self._cache.get(digest)
        if hit is not None and time.monotonic() - hit[0] < self.cache_seconds:
            return hit[1]
        # Requests that miss together (a key's entry expired under load) share one lookup;
        # one begun before a revocation is not shared with requests after it.
        lookup = functools.partial(self._look_up, digest, self._generation)
        return await self._lookups.run(digest, self._generation, lookup)

    async def _look_up(self, digest: str, generation: int) -> ApiKey | None:
        now = time.monotonic()
        row = await self.db.read(keys_sql.by_hash, digest)
        if row is None or not hmac.compare_digest(row.secret_hash, digest):
            return None
        if row.revoked_at is not None:
            return None
        key = ApiKey.from_row(row)
        if self.cache_seconds > 0 and generation == self._generation:
            if len(self._cache) >= self.CACHE_MAX:
                self._cache.clear()
            self._cache[digest] = (now, key)
        return key

    def forget(self, name: str | None = None) -> None:
        """Drop the named key (or every key) from the cache."""
        self._generation += 1
        if name is None:
            self._cache.clear()
            return
        for digest, (_, key) in list(self._cache.items()):
            if key.name == name:
                del self._cache[digest]

    async def create(
        self,
        name: str,
        role: Role,
        allowed_types: Sequence[str] | None = None,
        max_priority: Priority = Priority.MEDIUM,
        secret: str | None = None,
    ) -> tuple[ApiKey, str]:
        """Create a key; returns it with its secret, which is never stored nor shown again."""
        _check_name(name)
        if allowed_types is not None:
            unknown = [t for t in allowed_types if t not in self.job_types]
            if unknown:
                raise errors.JobTypeNotAllowed(
                    f"not configured job types: {', '.join(unknown)} (the server's job types"
                    f" are {', '.join(self.job_types)}: its QUEUELOG_JOB_TYPES setting, or"
                    " job_types in its QUEUELOG_CONFIG TOML file)",
                    ["input", "allowedTypes"],
                )
            allowed_types = tuple(dict.fromkeys(allowed_types))
        secret = secret or generate_secret()
        values = {
            "name": name,
            "role": role.value,
            "allowed_types": None
            if allowed_types is None
            else orjson.dumps(allowed_types).decode(),
            "max_priority": int(max_priority),
            "secret_hash": hash_secret(secret),
            "created_at": datetime.now(UTC),
        }
        try:
            row = await self.db.write(keys_sql.insert, values)
        except IntegrityError:
            row = None
        if row is None:
            raise errors.NameTaken(f"an API key named {name!r} exists already", ["input", "name"])
        return ApiKey.from_row(row), secret

    async def list(self) -> list[ApiKey]:
        return [ApiKey.from_row(r) for r in await self.db.read(keys_sql.all_keys)]

    async def revoke(self, name: str) -> bool:
        if not name.isprintable():  # no key has such a name (and PostgreSQL refuses NULs)
            return False
        revoked = await self.db.write(keys_sql.revoke, name, datetime.now(UTC))
        self.forget(name)
        return revoked

    async def count(self) -> int:
        return await self.db.read(keys_sql.count)
