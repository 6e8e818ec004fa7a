"""The change feed: one reader per process tails `job_events`; subscribers follow by cursor.

The reader keeps the newest events in a bounded in-memory window. A subscriber pulls every
event after its own cursor: from the window while its cursor is inside it, else from the
table. Nobody holds a per-subscriber queue, so a slow subscriber costs no memory and never
blocks anyone, and a reconnecting one resumes from its cursor with no gap and no duplicate.

On PostgreSQL events commit out of id order: the reader reads only up to the feed's
horizon (`events.readable`), so every subscriber still sees each event once, in id order.

The reader wakes on local commits, on PostgreSQL's NOTIFY (another process committed), and
every `poll_interval` seconds (SQLite across processes; PostgreSQL when NOTIFY is lost).

Retention deletes old events and records the newest id it deleted (`pruned_through`). A
subscriber whose cursor lies below that watermark may have missed events: it gets
CursorExpired rather than a silent gap (checked against the database when it subscribes,
then against the watermark as the reader last saw it and on every read of the table).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from queuelog.events.listen import listen
from queuelog.events.quota import PerKey
from queuelog.events.sessions import KeyRevoked, Session
from queuelog.service.models import Actor, JobEvent, Status
from queuelog.service.visibility import may_see, scope
from queuelog.storage import events as events_sql
from queuelog.storage.db import Database
from queuelog.storage.dialect import NOTIFY_CHANNEL
from queuelog.storage.tx import Tx

READ_BATCH = 500


class CursorExpired(Exception):
    """Events after this cursor were deleted by retention; resume from a newer cursor."""


class CursorAhead(Exception):
    """This cursor is newer than every event of this database."""


@dataclass(frozen=True, slots=True)
class Interest:
    """What one subscriber asked for, and who it is."""

    viewer: Actor
    job_id: int | None = None
    job_type: str | None = None
    statuses: frozenset[Status] | None = None

    def matches(self, e: JobEvent) -> bool:
        return (
            (self.job_id is None or e.job_id == self.job_id)
            and (self.job_type is None or e.job_type == self.job_type)
            and (self.statuses is None or e.status in self.statuses)
            and may_see(self.viewer, e.producer, e.worker_id)
        )

    def sql(self) -> dict[str, Any]:
        """The same filter for reading the table."""
        return {
            "job_id": self.job_id,
            "job_type": self.job_type,
            "statuses": None if self.statuses is None else [s.value for s in self.statuses],
            "scope": scope(self.viewer),
        }


def _batch(tx: Tx, cursor: int, upto: int | None, filters: dict[str, Any]) -> tuple[list[Any], int]:
    """Events after `cursor` (up to `upto`, else to the feed's horizon), then the
    pruned-through watermark: read in this order, a deletion that removed one of the
    events before we read them shows in the watermark."""
    if upto is None:
        upto = events_sql.readable(tx)  # first: the reads after it see below it all
    rows = events_sql.after(tx, cursor, READ_BATCH, upto=upto, **filters)
    return rows, events_sql.pruned_through(tx)


def _bounds(tx: Tx) -> tuple[int, int]:
    return events_sql.head(tx), events_sql.pruned_through(tx)


def _newest(tx: Tx) -> tuple[int, int]:
    return events_sql.newest_drawn(tx), events_sql.pruned_through(tx)


def _expired(cursor: int) -> str:
    return f"events after cursor {cursor:016d} were deleted by retention"


class EventFeed:
    def __init__(
        self, db: Database, *, window: int = 10_000, poll_interval: float = 0.25, idle: float = 5.0
    ) -> None:
        self.db = db
        self.poll_interval = poll_interval
        self.idle = idle  # a waiting subscriber re-checks its key at least this often
        self.head = 0  # newest event id this process has read
        self.followers = 0
        self._no_followers = asyncio.Event()
        self._size = window
        self._window: list[JobEvent] = []
        self._ids: list[int] = []
        self._floor = 0  # the window holds every event with floor < id <= head
        self.pruned_through = 0  # the retention watermark, as last read
        self._changed = asyncio.Event()
        self._wake = asyncio.Event()
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sessions: weakref.WeakSet[Session] = weakref.WeakSet()
        self._alerts: list[Callable[[], None]] = []  # told of revocations and of the stop
        self.per_key = PerKey()  # the open subscriptions of each key
        # With no follower the reader reads nothing; the next follower first moves the
        # window to the newest event (older events are read from the table on demand).
        # The event loop's thread owns the feed's state; `_asleep` is the one flag writer
        # threads read: the reader is behind with nobody following (see `_on_commit`).
        self._behind = False
        self._asleep = threading.Event()
        self._catching_up = asyncio.Lock()

    @property
    def held(self) -> int:
        """How many events this process holds in memory (bounded by twice the window)."""
        return len(self._window)

    @property
    def running(self) -> bool:
        return bool(self._tasks) and not self._stopping

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.head = self._floor = await self.db.read(events_sql.head)
        self.db.on_commit(self._on_commit)
        self._tasks.append(asyncio.create_task(self._run(), name="queuelog-event-feed"))
        if self.db.sql.notifies:  # another process's commits are announced
            url = self.db.url.set(drivername="postgresql").render_as_string(hide_password=False)
            listener = listen(url, NOTIFY_CHANNEL, self.poke)
            self._tasks.append(asyncio.create_task(listener, name="queuelog-event-listen"))

    async def finish(self, grace: float = 5.0) -> None:
        """End every subscription (each completes normally) and wait until they have."""
        self._stopping = True
        self._wake_followers()
        self._alert()
        if self.followers:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await self._no_followers.wait()
            await asyncio.sleep(0.05)  # let each operation send its `complete`

    async def stop(self) -> None:
        await self.finish()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    # -- sessions -----------------------------------------------------------------------

    def register(self, session: Session) -> None:
        self._sessions.add(session)

    def on_alert(self, callback: Callable[[], None]) -> None:
        """Call `callback` on every revocation heard of and when the feed stops: waiters
        that do not follow the feed (`events.progress`) need no timer to notice either."""
        self._alerts.append(callback)

    def _alert(self) -> None:
        for callback in list(self._alerts):
            callback()

    def revoke(self, name: str) -> None:
        """The key `name` was revoked: end its connections' subscriptions now."""
        for session in list(self._sessions):
            if session.name == name:
                session.revoke()
        self._wake_followers()
        self._alert()

    def recheck_keys(self) -> None:
        """Some key was revoked elsewhere: every connection re-verifies its key now."""
        for session in list(self._sessions):
            session.expire()
        self._wake_followers()
        self._alert()

    # -- the reader ---------------------------------------------------------------------

    def _on_commit(self) -> None:
        # Called in the writer thread after a commit that appended events. While nobody
        # follows and the reader has noticed as much, waking it would only have it notice
        # again: a follower that comes first moves the window to the newest event, and
        # this commit is older than that read (`_skip_ahead` clears `_asleep` first).
        if self._asleep.is_set():
            return
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._wake.set)

    def poke(self) -> None:
        """Ask the reader to look for new events now (e.g. on a NOTIFY; not while nobody
        follows, for the reason `_on_commit` gives)."""
        if self.followers or not self._behind:
            self._wake.set()

    def _wake_followers(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_interval):
                    await self._wake.wait()
            self._wake.clear()
            if not self.followers:
                self._behind = True
                self._asleep.set()
                continue
            try:
                await self._read_new()
            except asyncio.CancelledError:
                raise
            except Exception:  # the database may be briefly away; keep tailing
                await asyncio.sleep(self.poll_interval)

    async def _skip_ahead(self) -> None:
        async with self._catching_up:
            if not self._behind:
                return
            self._behind = False
            self._asleep.clear()
            head, pruned = await self.db.read(_bounds)
            self.pruned_through = max(self.pruned_through, pruned)
            head = max(head, pruned)  # retention may have deleted the newest events
            if head > self.head:
                self.head = self._floor = head
                self._window.clear()
                self._ids.clear()

    async def _read_new(self) -> None:
        while True:
            rows, pruned = await self.db.read(_batch, self.head, None, {})
            self.pruned_through = max(self.pruned_through, pruned)
            if not rows:
                return
            self._window.extend(JobEvent.from_row(r) for r in rows)
            self._ids.extend(r.id for r in rows)
            if len(self._ids) > 2 * self._size:  # trim, amortized
                cut = len(self._ids) - self._size
                self._floor = self._ids[cut - 1]
                del self._window[:cut], self._ids[:cut]
            self.head = rows[-1].id
            self._wake_followers()
            if len(rows) < READ_BATCH:
                return

    # -- subscribers --------------------------------------------------------------------

    async def check_cursor(self, cursor: int) -> None:
        """Refuse a cursor below the retention watermark, or newer than every event (it
        would silently skip what comes)."""
        # A cursor another replica handed out may lie past this one's horizon: it is
        # ahead only past every event committed.
        head, pruned = await self.db.read(_newest)
        if cursor > max(head, self.head, pruned):
            raise CursorAhead(f"cursor {cursor} is newer than every event")
        self.pruned_through = max(self.pruned_through, pruned)
        if cursor < self.pruned_through:
            raise CursorExpired(_expired(cursor))

    async def _after(self, cursor: int, interest: Interest) -> tuple[Sequence[JobEvent], int]:
        """Events after `cursor` up to the head this process has read, oldest first, and the
        cursor to continue from."""
        if cursor < self.pruned_through:
            raise CursorExpired(_expired(cursor))
        if cursor >= self._floor:
            start = bisect.bisect_right(self._ids, cursor)
            batch = self._window[start : start + READ_BATCH]
            return batch, batch[-1].id
        upto = self.head
        rows, pruned = await self.db.read(_batch, cursor, upto, interest.sql())
        if pruned > cursor:
            raise CursorExpired(_expired(cursor))
        more = len(rows) == READ_BATCH
        return [JobEvent.from_row(r) for r in rows], rows[-1].id if more else upto

    async def follow(
        self, after: int | None, interest: Interest, session: Session | None = None
    ) -> AsyncIterator[JobEvent]:
        """Every event after `after` (or from now) that `interest` matches, then live ones, in
        cursor order, until the feed stops. Raises CursorExpired, or KeyRevoked once the
        session's key is revoked."""
        if self._behind:
            await self._skip_ahead()
        cursor = self.head if after is None else after
        self.followers += 1
        self._asleep.clear()  # commits wake the reader again
        self._no_followers.clear()
        try:
            while self.running:
                if session is not None:
                    await session.check()
                if cursor >= self.head:
                    changed = self._changed
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.idle):
                            await changed.wait()
                    continue
                batch, cursor = await self._after(cursor, interest)
                for event in batch:
                    if interest.matches(event):
                        yield event
        finally:
            self.followers -= 1
            if not self.followers:
                self._no_followers.set()


__all__ = ["CursorAhead", "CursorExpired", "EventFeed", "Interest", "KeyRevoked"]
