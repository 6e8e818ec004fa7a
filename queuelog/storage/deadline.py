"""How long a read may run: until the deadline of the request it serves.

A GraphQL execution sets its deadline where it begins (`within`); `Database.read` takes it
from there, and the backend holds each of the read's statements to it
(`Dialect.deadline`): PostgreSQL cancels a statement still running at the deadline, SQLite
interrupts it. Such a read raises DeadlinePassed, and leaves nothing running. Work done
outside a request (the feed, maintenance, the CLI) has no deadline.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar

_until: ContextVar[float | None] = ContextVar("queuelog_deadline", default=None)


class DeadlinePassed(Exception):
    """A read ran until its request's deadline, and was stopped there."""

    def __init__(self) -> None:
        super().__init__("the read ran past its request's deadline and was stopped")


@contextlib.contextmanager
def within(seconds: float | None) -> Iterator[None]:
    """Reads made in this context (this task, and tasks it starts) stop `seconds` from now;
    no deadline when None. An enclosing deadline that is sooner stays."""
    if seconds is None:
        yield
        return
    until = time.monotonic() + seconds
    outer = _until.get()
    token = _until.set(until if outer is None else min(outer, until))
    try:
        yield
    finally:
        _until.reset(token)


def current() -> float | None:
    """This context's deadline (a `time.monotonic()` instant), or None."""
    return _until.get()


def left(until: float) -> float:
    """Seconds until `until`; DeadlinePassed if it has passed."""
    seconds = until - time.monotonic()
    if seconds <= 0:
        raise DeadlinePassed
    return seconds
