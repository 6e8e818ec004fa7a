"""What a handler receives and may raise."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from queuelog.client.models import Job


class PermanentError(Exception):
    """Raised by a handler: the job fails for good, with no further retry."""


class JobCancelled(Exception):
    """Raised by `RunningJob.raise_if_cancelled` once the job was cancelled or timed out."""


_NOTHING: Any = object()


@dataclass(eq=False)
class RunningJob:
    """The job a handler works on. `cancelled` reads True once the job is cancelled, its
    lease is lost, its handler timed out, or the worker stops: a sync handler should check
    it (`if job.cancelled:`), or wait on it with `wait_cancelled(seconds)`."""

    job: Job
    cancelled_event: threading.Event = field(default_factory=threading.Event)
    _reported: Any = _NOTHING
    _wake: Callable[[], None] | None = None

    @property
    def id(self) -> str:
        return self.job.id

    @property
    def type(self) -> str:
        return self.job.type

    @property
    def payload(self) -> dict[str, Any]:
        return self.job.payload

    @property
    def retry_count(self) -> int:
        return self.job.retry_count

    def progress(self, value: Any) -> None:
        """Report progress (JSON, at most 4 KiB); the latest value is sent with the next
        heartbeat, which comes soon. Callable from any thread."""
        self._reported = value
        if self._wake is not None:
            self._wake()

    @property
    def cancelled(self) -> bool:
        """Whether the handler should stop: the job was cancelled, its lease lost, its
        handler timed out, or the worker is stopping."""
        return self.cancelled_event.is_set()

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Block up to `timeout` seconds (None: for ever) until the handler should stop;
        returns `cancelled`. For sync handlers that sleep between steps."""
        return self.cancelled_event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        if self.cancelled:
            raise JobCancelled(f"job {self.id} was cancelled")

    def take_progress(self) -> Any:
        """The progress reported since the last call, or `_NOTHING`."""
        value, self._reported = self._reported, _NOTHING
        return value

    def restore_progress(self, value: Any) -> None:
        """Put back a report that could not be sent, unless a newer one came meanwhile."""
        if not has_progress(self._reported):
            self._reported = value

    def bind(self, loop: asyncio.AbstractEventLoop, wake: asyncio.Event) -> None:
        def notify() -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody to tell
                loop.call_soon_threadsafe(wake.set)

        self._wake = notify


def has_progress(value: Any) -> bool:
    return value is not _NOTHING
