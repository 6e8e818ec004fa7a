"""Token buckets, one per key: per API key for requests, per client address for failed
authentication attempts (so secrets cannot be brute-forced)."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable


class RateLimited(Exception):
    def __init__(self, retry_after: float) -> None:
        super().__init__(f"rate limit exceeded; retry after {retry_after:.2f} s")
        self.retry_after = retry_after

    @property
    def header(self) -> str:
        """The whole seconds of a `Retry-After` header (at least 1)."""
        return str(max(1, math.ceil(self.retry_after)))


class TokenBuckets:
    """`burst` tokens per key, refilled at `rate` per second. Only the event loop touches
    it, so it needs no lock. At most `max_keys` buckets are kept (least recently used go
    first; a bucket that is gone starts full again)."""

    def __init__(
        self,
        rate: float,
        burst: int,
        max_keys: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.max_keys = max_keys
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def _tokens(self, key: str) -> float:
        tokens, last = self._buckets.get(key, (self.burst, self.clock()))
        return min(self.burst, tokens + (self.clock() - last) * self.rate)

    def _store(self, key: str, tokens: float) -> None:
        self._buckets[key] = (tokens, self.clock())
        self._buckets.move_to_end(key)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)

    def wait(self, key: str) -> float:
        """Seconds until `key` has a token (0 when it has one now); consumes nothing."""
        if not self.enabled:
            return 0.0
        return max(0.0, (1.0 - self._tokens(key)) / self.rate)

    def take(self, key: str) -> None:
        """Consume a token of `key`, or raise RateLimited when it has none."""
        if not self.enabled:
            return
        tokens = self._tokens(key)
        if tokens < 1.0:
            raise RateLimited((1.0 - tokens) / self.rate)
        self._store(key, tokens - 1.0)

    def check(self, key: str) -> None:
        """Raise RateLimited when `key` has no token; consumes nothing."""
        if (wait := self.wait(key)) > 0:
            raise RateLimited(wait)
