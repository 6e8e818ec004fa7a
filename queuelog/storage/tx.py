"""The transaction every storage function is handed: its connection, and the job events it
will append when its work is done."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy.engine import Connection

if TYPE_CHECKING:
    from queuelog.storage.dialect import Dialect


class EventRow(NamedTuple):
    """A `job_events` row to append, in the table's column order."""

    job_id: int
    job_type: str
    producer: str
    worker_id: str | None
    previous_status: str | None
    status: str
    occurred_at: Any


@dataclass(slots=True)
class Tx:
    """One transaction: its connection, its backend's dialect, and the job events it will
    append at the end. Used by one thread at a time."""

    conn: Connection
    dialect: Dialect
    events: list[EventRow] = field(default_factory=list)
    # Job-count changes of work that appends no event (a prune's): applied with the events,
    # under the event-order lock, as every counter change is.
    deltas: list[tuple[str, str, str, int]] = field(default_factory=list)
    cursor: Any = None  # the driver's cursor, once `driver_cursor` has been asked for it
    xid: str | None = None  # PostgreSQL: the transaction's id, once it appends events
    appended: bool = False  # events went in with the statement that made them (PostgreSQL)
    # The transaction's remaining work takes no lock but the event-order lock, the last
    # lock a transaction takes (docs/design.md, "Lock order"): a statement may now append
    # its own events, taking that lock (`batches.run_calls` sets it for the `Rows` calls).
    closing: bool = False
    done: set[str] = field(default_factory=set)  # see `first`
    # The last time bound and the last one read (SQLite): a row's times are often one instant.
    bound_time: tuple[datetime | None, str] = (None, "")
    read_time: tuple[str, datetime] = ("", datetime.min)

    def driver_cursor(self) -> Any:
        """The driver's cursor for this transaction (the same connection Core uses)."""
        if self.cursor is None:
            driver_connection: Any = self.conn.connection.driver_connection
            self.cursor = driver_connection.cursor()
        return self.cursor

    def first(self, what: str) -> bool:
        """True the first time `what` is asked about in this transaction: for work that one
        write does on behalf of every write batched with it (a claim's lease rescue)."""
        if what in self.done:
            return False
        self.done.add(what)
        return True

    @property
    def has_events(self) -> bool:
        """Whether this transaction appends events (so its commit wakes the feed)."""
        return self.appended or bool(self.events)

    def record(self, row: Any, previous_status: str | None) -> None:
        """Record a status change of the job `row` (a jobs row after the change)."""
        self.events.append(
            EventRow(
                row.id,
                row.type,
                row.producer,
                row.worker_id,
                previous_status,
                row.status,
                row.updated_at,
            )
        )
