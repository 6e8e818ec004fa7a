"""The change feed: one reader per process tails `job_events`; subscribers follow by cursor.

The reader keeps the newest events in a bounded in-memory window. A subscriber pulls every
event after its own cursor: from the window while its cursor is inside it, else from the
table. Nobody holds a per-subscriber queue, so a slow subscriber costs no memory and never
blocks anyone, and a reconnecting one resumes from its cursor with no gap and no duplicate.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

from queuelog.service.models import JobEvent, Role, Status
from queuelog.storage import events as events_sql
from queuelog.storage.db import Database

READ_BATCH = 500


@dataclass(frozen=True, slots=True)
class EventFilter:
    job_id: int | None = None
    job_type: str | None = None
    statuses: frozenset[Status] | None = None

    def matches(self, e: JobEvent) -> bool:
        return (
            (self.job_id is None or e.job_id == self.job_id)
            and (self.job_type is None or e.job_type == self.job_type)
            and (self.statuses is None or e.status in self.statuses)
        )


def may_see(role: Role, name: str, e: JobEvent) -> bool:
    """The service's visibility rule, applied to one event."""
    if role is Role.ADMIN:
        return True
    if role is Role.PRODUCER:
        return e.producer == name
    return e.worker_id == name


class EventFeed:
    def __init__(self, db: Database, *, window: int = 10_000, poll_interval: float = 0.25) -> None:
        self.db = db
        self.poll_interval = poll_interval
        self.head = 0  # newest event id this process has read
        self._size = window
        self._window: list[JobEvent] = []
        self._ids: list[int] = []
        self._floor = 0  # the window holds every event with floor < id <= head
        self._changed = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.head = self._floor = await self.db.read(events_sql.head)
        self.db.on_commit(self._on_commit)
        self._task = asyncio.create_task(self._run(), name="queuelog-event-feed")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._changed.set()

    def _on_commit(self) -> None:
        # Called in the writer thread after a commit that appended events.
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._wake.set)

    def poke(self) -> None:
        """Ask the reader to look for new events now (e.g. on a NOTIFY)."""
        self._wake.set()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_interval)
            self._wake.clear()
            try:
                await self._read_new()
            except asyncio.CancelledError:
                raise
            except Exception:  # the database may be briefly away; keep tailing
                await asyncio.sleep(self.poll_interval)

    async def _read_new(self) -> None:
        while True:
            rows = await self.db.read(events_sql.after, self.head, READ_BATCH)
            if not rows:
                return
            self._window.extend(JobEvent.from_row(r) for r in rows)
            self._ids.extend(r.id for r in rows)
            if len(self._ids) > 2 * self._size:  # trim, amortized
                cut = len(self._ids) - self._size
                self._floor = self._ids[cut - 1]
                del self._window[:cut], self._ids[:cut]
            self.head = rows[-1].id
            changed, self._changed = self._changed, asyncio.Event()
            changed.set()
            if len(rows) < READ_BATCH:
                return

    async def _after(self, cursor: int) -> Sequence[JobEvent]:
        """Events after `cursor` up to the head this process has read, oldest first."""
        if cursor >= self._floor:
            start = bisect.bisect_right(self._ids, cursor)
            return self._window[start : start + READ_BATCH]
        rows = await self.db.read(events_sql.after, cursor, READ_BATCH, upto=self.head)
        return [JobEvent.from_row(r) for r in rows]

    async def follow(
        self,
        after: int | None,
        accept: Callable[[JobEvent], bool],
        alive: Callable[[], bool] = lambda: True,
    ) -> AsyncIterator[JobEvent]:
        """Every event after `after` (or from now) that `accept` admits, then live ones, in
        cursor order, until `alive()` turns false or the feed stops."""
        cursor = self.head if after is None else after
        while alive() and self._task is not None:
            if cursor >= self.head:
                changed = self._changed
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), 5.0)
                continue
            for event in await self._after(cursor):
                cursor = event.id
                if accept(event):
                    yield event
