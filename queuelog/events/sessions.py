"""One WebSocket connection's API key, as its operations see it.

A connection authenticates once, in `connection_init`. Its key can be revoked later: in this
process (`revokeApiKey` marks the connection's session at once) or in another one. Every
operation the connection starts confirms the key first, through the key store, so it is
refused as soon as an HTTP request with that key would be; an open subscription re-verifies
it every `recheck` seconds (one lookup per connection however many subscriptions it runs),
and at once when `expire()` says a revocation was heard of.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger("queuelog.events")


class KeyRevoked(Exception):
    """The API key of this connection was revoked."""


class Session:
    def __init__(
        self,
        name: str,
        verify: Callable[[], Awaitable[bool]],
        recheck: float,
        on_revoke: Callable[[], None] = lambda: None,
        on_expire: Callable[[], None] = lambda: None,
    ) -> None:
        self.name = name
        self.revoked = False
        self._verify = verify
        self._recheck = recheck
        self._on_revoke = on_revoke
        self._on_expire = on_expire  # told when a revocation elsewhere was heard of
        self._checked_at = time.monotonic()
        self._lock = asyncio.Lock()

    def revoke(self) -> None:
        if not self.revoked:
            self.revoked = True
            self._on_revoke()

    def expire(self) -> None:
        """Have the next `check()` re-verify the key (another process revoked some key)."""
        self._checked_at = float("-inf")
        self._on_expire()

    async def confirm(self) -> None:
        """Raise KeyRevoked unless the key is live now, as an HTTP request would find it."""
        if not self.revoked:
            await self._reverify()
        if self.revoked:
            raise KeyRevoked(f"the API key {self.name!r} was revoked")

    async def check(self) -> None:
        """Raise KeyRevoked once the key is revoked; re-verify it when the last check is old."""
        if not self.revoked and time.monotonic() - self._checked_at >= self._recheck:
            async with self._lock:
                if time.monotonic() - self._checked_at >= self._recheck:
                    await self._reverify()
        if self.revoked:
            raise KeyRevoked(f"the API key {self.name!r} was revoked")

    async def _reverify(self) -> None:
        try:
            live = await self._verify()
        except Exception:  # the database may be briefly away: keep serving
            log.warning("could not re-verify the key %r", self.name, exc_info=True)
            live = True
        self._checked_at = time.monotonic()
        if not live:
            self.revoke()
