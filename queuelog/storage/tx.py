"""The transaction every storage function is handed: its connection, and the job events it
will append when its work is done."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy.engine import Connection


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
    """One transaction: its connection and the job events it will append at the end."""

    conn: Connection
    dialect: str
    events: list[EventRow] = field(default_factory=list)
    cursor: Any = None  # the driver's cursor, once `storage.driver` has asked for it
    xid: str | None = None  # PostgreSQL: the transaction's id, once it appends events
    appended: bool = False  # events went in with the statement that made them (PostgreSQL)
    done: set[str] = field(default_factory=set)  # see `first`

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
