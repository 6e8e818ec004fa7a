"""Retry delays: exponential with full jitter, capped (AWS's "full jitter")."""

from __future__ import annotations

import random


def backoff_seconds(
    retry_count: int, base: float, cap: float, rand: random.Random | None = None
) -> float:
    """Delay before attempt `retry_count + 1`: uniform in [0, min(cap, base * 2**retry_count)].
    A base of 0 gives the seed's instant retry."""
    if base <= 0 or cap <= 0:
        return 0.0
    ceiling = min(cap, base * (2 ** min(retry_count, 62)))
    return (rand or random).uniform(0, ceiling)
