"""One WebSocket connection's API key, as its subscriptions see it.

A connection authenticates once, in `connection_init`. Its key can be revoked later: in this
process (`revokeApiKey` marks the connection's session at once) or in another one (every
open subscription re-verifies its connection's key every `recheck` seconds, one database
read per connection however many subscriptions it runs).
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
    ) -> None:
        self.name = name
        self.revoked = False
        self._verify = verify
        self._recheck = recheck
        self._on_revoke = on_revoke
        self._checked_at = time.monotonic()
        self._lock = asyncio.Lock()

    def revoke(self) -> None:
        if not self.revoked:
            self.revoked = True
            self._on_revoke()

    async def check(self) -> None:
        """Raise KeyRevoked once the key is revoked; re-verify it when the last check is old."""
        if not self.revoked and time.monotonic() - self._checked_at >= self._recheck:
            async with self._lock:
                if time.monotonic() - self._checked_at >= self._recheck:
                    try:
                        live = await self._verify()
                    except Exception:  # the database may be briefly away: keep serving
                        log.warning("could not re-verify the key %r", self.name, exc_info=True)
                        live = True
                    self._checked_at = time.monotonic()
                    if not live:
                        self.revoke()
        if self.revoked:
            raise KeyRevoked(f"the API key {self.name!r} was revoked")
