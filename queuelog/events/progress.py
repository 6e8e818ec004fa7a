"""Progress of running jobs for `jobProgress` subscribers.

Progress is not a status change and makes no event. One reader per process looks at every
job someone follows, all in one query, `interval` seconds apart, and tells each follower
when its job's progress or status changed. That works alike on every backend and across
replicas, costs nothing while nobody follows, and sends a follower at most one report per
interval (the latest wins). A follower sleeps until its job changes, its key is revoked, or
the feed stops (the feed's alerts): no timer of its own."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from typing import Any

from queuelog.domain.lifecycle import FINISHED
from queuelog.events.feed import EventFeed
from queuelog.events.sessions import Session
from queuelog.storage import jobs as jobs_sql

INTERVAL_SECONDS = 0.1
_FINISHED = tuple(s.value for s in FINISHED)
_watches: weakref.WeakKeyDictionary[EventFeed, ProgressWatch] = weakref.WeakKeyDictionary()


def progress_watch(feed: EventFeed) -> ProgressWatch:
    """The process's watch over the database of `feed` (it ends with the feed)."""
    watch = _watches.get(feed)
    if watch is None:
        watch = _watches[feed] = ProgressWatch(feed)
    return watch


class ProgressWatch:
    def __init__(self, feed: EventFeed, interval: float = INTERVAL_SECONDS) -> None:
        self.feed = feed
        self.interval = interval
        self._latest: dict[int, Any] = {}  # job id -> (id, status, progress, progress_at)
        self._followers: dict[int, set[asyncio.Event]] = {}
        self._reader: asyncio.Task[None] | None = None
        feed.on_alert(self._alert)

    def _alert(self) -> None:
        """A key was revoked or the feed stops: every follower looks."""
        for followers in self._followers.values():
            for changed in followers:
                changed.set()

    async def follow(self, job_id: int, session: Session | None = None) -> AsyncIterator[Any]:
        """The job's progress row now, then each time its progress or status changes;
        ends after a row showing the job finished, or gone (None), or when the feed stops.
        Raises KeyRevoked once `session`'s key is revoked."""
        changed = asyncio.Event()
        self._followers.setdefault(job_id, set()).add(changed)
        if self._reader is None or self._reader.done():
            self._reader = asyncio.create_task(self._read(), name="queuelog-progress")
        try:
            found = await self.feed.db.read(jobs_sql.progress_of, [job_id])
            row = found[0] if found else None
            while True:
                yield row
                if row is None or row.status in _FINISHED:
                    return
                seen = _version(row)
                while _version(row) == seen:
                    if not self.feed.running:
                        return
                    if session is not None:
                        await session.check()
                    await changed.wait()
                    changed.clear()
                    row = self._latest.get(job_id, row)
        finally:
            followers = self._followers.get(job_id, set())
            followers.discard(changed)
            if not followers:
                self._followers.pop(job_id, None)
                self._latest.pop(job_id, None)

    async def _read(self) -> None:
        while self._followers:
            await asyncio.sleep(self.interval)
            ids = list(self._followers)
            if not ids:
                return
            try:
                rows = await self.feed.db.read(jobs_sql.progress_of, ids)
            except Exception:  # the database may be briefly away: try again next time
                continue
            found = {r.id: r for r in rows}
            for job_id in ids:
                row = found.get(job_id)
                before = self._latest.get(job_id)
                if job_id not in self._latest or _version(row) != _version(before):
                    self._latest[job_id] = row
                    for changed in self._followers.get(job_id, ()):
                        changed.set()


def _version(row: Any) -> tuple[Any, ...]:
    return (None, "gone") if row is None else (row.progress_at, row.status)
