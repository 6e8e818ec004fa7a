"""Transactions the database gave up on for a conflict run again (`Database`).

PostgreSQL ends a transaction with a deadlock (SQLSTATE 40P01) or a serialization failure
(40001) because of what other transactions did at the same moment, not because of its own
work: it rolled back, and the same work run again most often goes through. The writers and
readers of `Database` run each transaction through `retrying`, so no caller ever sees such
an error; if every try fails, the caller gets `Contended`, which the API answers as a
retryable error (code TRY_AGAIN), not as a fault of the server.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from queuelog.domain.codes import ErrorCode

T = TypeVar("T")
log = logging.getLogger("queuelog.storage")

CONFLICTS = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure
TRIES = 5  # the first run and up to four more
BACKOFF_FIRST = 0.005  # seconds: the ceiling of the first wait, doubled for each try after


class Contended(Exception):
    """The database ended the transaction for a conflict with others on every try; it
    took no effect, and the same request may be sent again."""

    code = ErrorCode.TRY_AGAIN

    def __init__(self, tries: int, sqlstate: str) -> None:
        super().__init__(
            f"the database ended this transaction {tries} times for a conflict with"
            f" concurrent ones (SQLSTATE {sqlstate}); nothing was changed: try again"
        )
        self.tries, self.sqlstate = tries, sqlstate


def conflict(exc: BaseException) -> str | None:
    """The SQLSTATE of a deadlock or serialization failure behind `exc` (psycopg's own,
    SQLAlchemy's wrapping of it, or a failed COMMIT's), else None."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        seen.add(id(found))
        state = getattr(found, "sqlstate", None) or getattr(found, "pgcode", None)
        if state in CONFLICTS:
            return str(state)
        orig = getattr(found, "orig", None)  # SQLAlchemy's DBAPIError
        if isinstance(orig, BaseException) and conflict(orig):
            return conflict(orig)
        found = found.__cause__ or found.__context__
    return None


def retrying(
    run: Callable[[], T], *, tries: int = TRIES, sleep: Callable[[float], None] = time.sleep
) -> T:
    """`run()`, run again after a short jittered wait while the database ends it for a
    conflict, up to `tries` times in all; then `Contended`. `run` must roll its
    transaction back when it raises (as leaving `Database._transaction` does)."""
    for attempt in range(1, tries + 1):
        try:
            return run()
        except Exception as exc:
            state = conflict(exc)
            if state is None:
                raise
            if attempt == tries:
                log.warning("transaction ended for a conflict (%s) %d times: gave up", state, tries)
                raise Contended(tries, state) from exc
            # A warning: with the lock order kept, a deadlock is a bug worth seeing.
            log.warning("transaction ended for a conflict (%s): running it again", state)
            sleep(random.uniform(0, BACKOFF_FIRST * 2 ** (attempt - 1)))
    raise AssertionError("unreachable")  # the loop returns or raises
