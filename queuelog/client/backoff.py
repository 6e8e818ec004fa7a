"""Capped exponential backoff with jitter, for retries after network errors."""

from __future__ import annotations

import asyncio
import random


class Backoff:
    """Delays that double from `first` up to `cap`, each drawn from its upper half so that
    many clients restarted together do not retry in step."""

    def __init__(self, first: float = 0.05, cap: float = 5.0) -> None:
        self.first = first
        self.cap = cap
        self.attempts = 0

    def next_delay(self) -> float:
        ceiling = min(self.cap, self.first * 2 ** min(self.attempts, 30))
        self.attempts += 1
        return float(ceiling / 2 + random.random() * ceiling / 2)

    def reset(self) -> None:
        self.attempts = 0

    async def sleep(self) -> None:
        await asyncio.sleep(self.next_delay())
