"""One call in flight per key, shared by every caller that asks for that key meanwhile."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SingleFlight(Generic[K, V]):
    """Concurrent asks for the same key share one call.

    Each ask carries a `since`, a number that only grows (an event id, a cache generation):
    a caller joins the call in flight only if that call began with a `since` at least as
    large as its own; otherwise it starts a call of its own, which later callers join.
    A caller that leaves (cancelled) does not cancel the call the others are waiting on; a
    call that fails fails everyone who joined it, and the next ask calls afresh."""

    def __init__(self) -> None:
        self._flights: dict[K, tuple[int, asyncio.Future[V]]] = {}

    async def run(self, key: K, since: int, call: Callable[[], Awaitable[V]]) -> V:
        flight = self._flights.get(key)
        if flight is None or flight[0] < since:
            flight = (since, asyncio.ensure_future(call()))
            self._flights[key] = flight
            flight[1].add_done_callback(functools.partial(self._landed, key, flight))
        return await asyncio.shield(flight[1])

    def _landed(self, key: K, flight: tuple[int, asyncio.Future[V]], _: object) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        if not flight[1].cancelled():
            flight[1].exception()  # retrieved here even if every caller left
