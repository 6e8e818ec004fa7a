"""How many subscriptions each API key has open in this process, held to a bound."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class TooManySubscriptions(Exception):
    """The key has as many subscriptions open as it may."""


class PerKey:
    def __init__(self) -> None:
        self.open: dict[str, int] = {}

    @contextmanager
    def held(self, name: str, most: int) -> Iterator[None]:
        """One more subscription of the key `name` while the block runs; raises
        TooManySubscriptions when it has `most` open already."""
        held = self.open.get(name, 0)
        if held >= most:
            raise TooManySubscriptions(
                f"this API key has {most} subscriptions open on this server already, the most"
                " it may have (QUEUELOG_MAX_SUBSCRIPTIONS_PER_KEY): end one first"
            )
        self.open[name] = held + 1
        try:
            yield
        finally:
            if (left := self.open[name] - 1) > 0:
                self.open[name] = left
            else:
                del self.open[name]
