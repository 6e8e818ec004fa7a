"""One attempt at one job: run its handler, keep its lease alive, and report the outcome
once, retrying the report until the server has it or the lease is certainly lost."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from queuelog.client.backoff import Backoff
from queuelog.client.clients import AsyncClient
from queuelog.client.models import Job, JobStatus, QueuelogError, Settlement, UserError
from queuelog.domain.codes import UserErrorCode
from queuelog.worker.acks import Acks, transient
from queuelog.worker.job import PermanentError, RunningJob, has_progress

log = logging.getLogger("queuelog.worker")
Handler = Callable[[RunningJob], Any]
PROGRESS_INTERVAL = 0.2  # the earliest a reported progress goes out after the last heartbeat
BEAT_MIN = 0.2  # seconds between heartbeats at the least, whatever lease a server grants


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the worker reports: complete with `result`, or fail with `error`."""

    completed: bool
    result: Any = None
    error: str = ""
    retryable: bool = True


def error_text(exc: BaseException) -> str:
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


async def call_handler(
    handler: Handler, running: RunningJob, returned: Callable[[], None] = lambda: None
) -> Any:
    """A coroutine function runs on the loop; a plain function in a daemon thread (so a
    handler that never returns cannot keep the process from exiting). `returned` is called
    on the loop once the handler is over, its thread too: a thread runs on after this call
    is cancelled (a timeout, a stop), as nothing can stop it."""
    if inspect.iscoroutinefunction(handler):
        try:
            return await handler(running)
        finally:
            returned()
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        returned()
        if not future.done():
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    def work() -> None:
        try:
            out, ok = handler(running), True
        except BaseException as exc:
            out, ok = exc, False
        with contextlib.suppress(RuntimeError):  # the loop has closed: the worker is gone
            loop.call_soon_threadsafe(settle, ok, out)

    threading.Thread(target=work, name=f"queuelog-job-{running.id}", daemon=True).start()
    return await future


class Attempt:
    def __init__(
        self,
        client: AsyncClient,
        acks: Acks,
        job: Job,
        handler: Handler,
        *,
        lease_seconds: int | None,
        timeout: float | None,
        received_at: float,
        slots: asyncio.Semaphore | None = None,
        on_handled: Callable[[float | None], None] = lambda seconds: None,
        after: asyncio.Event | None = None,
    ) -> None:
        self.client = client
        self.acks = acks
        self.job = job
        self.running = RunningJob(job)
        self.handler = handler
        self.lease_request = lease_seconds
        self.lease = float(lease_seconds or job.lease_seconds or 30)
        self.timeout = timeout
        # The server set the lease before we received it: it has certainly ended by then.
        self.lost_after = received_at + self.lease
        self.started = time.monotonic()  # when the handler started (or the attempt, until then)
        self.slots = slots  # the worker's running handlers: a claimed-ahead job waits for one
        self.handled = False  # the handler is over; its outcome may still be on its way
        self.handler_seconds: float | None = None  # how long it ran, once over
        self._on_handled = on_handled
        self.stop_reason: str | None = None
        self._wake = asyncio.Event()
        self._handler_task: asyncio.Task[Any] | None = None
        self._in_slot = False  # this attempt holds one of the worker's slots
        self._called = False  # its handler was called
        self.returned = asyncio.Event()  # the handler is over (a plain one's thread too)
        # The job is no longer this attempt's: its outcome is on its way (or it was stopped),
        # so a claim may bring it back as a retry.
        self.released = False
        self._after = after  # the end of an earlier attempt's handler at this job

    def stop(self, reason: str) -> None:
        """End the handler without reporting its outcome (cancelled, lease lost), or with a
        retryable failure (the worker stops)."""
        if self.stop_reason is None:
            self.stop_reason = reason
        self.running.cancelled_event.set()
        if self._handler_task is not None:
            self._handler_task.cancel()

    async def run(self) -> None:
        self.running.bind(asyncio.get_running_loop(), self._wake)
        beats = asyncio.create_task(self._heartbeats())
        overran = False
        try:
            try:
                outcome = await self._outcome()
                # A plain handler past its timeout (or stopped) runs on in its thread: the
                # outcome goes now, the slot stays taken until the thread returns.
                overran = self._called and not self.returned.is_set()
                self.released = True
            finally:
                if not overran:
                    self._over()
            if outcome is not None:
                await self._report(outcome)
            else:
                self._log(self.stop_reason or "stopped")
            if overran:
                beats.cancel()  # the job is no longer this attempt's to keep
                log.warning(
                    "job %s: its handler's thread runs on past the end of the attempt; "
                    "its slot stays taken until it returns",
                    self.job.id,
                )
                await self.returned.wait()
        finally:
            if overran:
                self._over()
            beats.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beats

    def _over(self) -> None:
        """The handler is over (or never started): its slot is free for the next job."""
        if not self._called:
            self.returned.set()
        if self._in_slot and self.slots is not None:
            self._in_slot = False
            self.slots.release()
        if not self.handled:
            self.handled = True
            self._on_handled(self.handler_seconds)

    async def _handle(self) -> Any:
        """The handler's run, once one of the worker's slots is free (at once unless this job
        was claimed ahead), and within the handler's timeout. The slot is given back by
        `_over`, once the handler is over."""
        if self.slots is not None:
            await self.slots.acquire()
            self._in_slot = True
        if self._after is not None:  # never two handlers at one job in this worker
            await self._after.wait()
        return await self._timed()

    async def _timed(self) -> Any:
        self.started = time.monotonic()
        self._called = True
        try:
            async with asyncio.timeout(self.timeout):
                return await call_handler(self.handler, self.running, self.returned.set)
        finally:
            self.handler_seconds = time.monotonic() - self.started

    async def _outcome(self) -> Outcome | None:
        if self.stop_reason is not None:  # cancelled while it waited for a slot
            return self._stopped()
        self._handler_task = asyncio.create_task(self._handle())
        try:
            result = await asyncio.shield(self._handler_task)
        except TimeoutError:
            self._handler_task.cancel()
            self.running.cancelled_event.set()
            return Outcome(False, error=f"TimeoutError: the handler ran over {self.timeout:g}s")
        except asyncio.CancelledError:
            if self.stop_reason is None:  # the worker's own task was cancelled
                raise
            return self._stopped()
        except PermanentError as exc:
            return Outcome(False, error=error_text(exc), retryable=False)
        except Exception as exc:
            if self.stop_reason is not None and self.stop_reason != "shutdown":
                return None  # e.g. a sync handler that raised once told it was cancelled
            return Outcome(False, error=error_text(exc))
        if self.stop_reason == "shutdown":
            pass  # it finished in time after all: report its result
        elif self.stop_reason is not None:
            return None
        try:
            json.dumps(result)
        except (TypeError, ValueError) as exc:
            return Outcome(False, error=f"ResultNotJSON: {exc}", retryable=False)
        return Outcome(True, result=result)

    def _stopped(self) -> Outcome | None:
        """The outcome of a handler stopped (or never started) for `stop_reason`."""
        if self.stop_reason == "shutdown":
            return Outcome(False, error="WorkerStopped: the worker stopped before the end")
        return None

    async def _heartbeats(self) -> None:
        backoff = Backoff(first=BEAT_MIN, cap=max(BEAT_MIN, self.lease / 6))
        interval = max(BEAT_MIN, self.lease / 3)  # a lease granted already over: no spin
        delay = interval
        while True:
            delay = max(BEAT_MIN, delay)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()
                await asyncio.sleep(PROGRESS_INTERVAL)  # gather a burst of reports into one
            self._wake.clear()
            progress = self.running.take_progress()
            sent = time.monotonic()
            try:
                if has_progress(progress):
                    job = await self.client.heartbeat(
                        self.job.id, lease_seconds=self.lease_request, progress=progress
                    )
                else:
                    job = await self.client.heartbeat(self.job.id, lease_seconds=self.lease_request)
            except UserError as exc:
                self._refused(exc)
                return
            except QueuelogError as exc:
                self.running.restore_progress(progress)  # send it with the next beat
                if not transient(exc):
                    log.warning("job %s: heartbeat refused: %s", self.job.id, exc)
                if time.monotonic() > self.lost_after:
                    self.stop("lease lost")
                    return
                delay = min(backoff.next_delay(), max(0.0, self.lost_after - time.monotonic()))
                continue
            backoff.reset()
            self.lost_after = sent + (job.lease_seconds or self.lease)
            delay = interval

    def _refused(self, exc: UserError) -> None:
        if exc.job is not None and exc.job.status == JobStatus.CANCELLED:
            self.stop("CANCELLED")
        elif exc.code in (UserErrorCode.NOT_JOB_OWNER, UserErrorCode.NOT_FOUND):
            self.stop("lease lost")
        # Other refusals (the job already settled by this attempt's report) end the beats.

    async def _report(self, outcome: Outcome) -> None:
        """Send the one outcome, the same each try, until the server has answered for it."""
        settlement = Settlement(
            self.job.id, outcome.completed, outcome.result, outcome.error, outcome.retryable
        )
        backoff = Backoff(first=0.1, cap=5.0)
        while True:
            try:
                answer = await self.acks.send(settlement)
                if answer.refused is not None:
                    self._settled_already(outcome, answer.refused, answer.status)
                elif not outcome.completed:
                    self._log(
                        "FAILED, will retry" if answer.will_retry else "FAILED", outcome.error
                    )
                else:
                    self._log("COMPLETED")
                return
            except QueuelogError as exc:
                if not transient(exc):
                    self._log("not reported", str(exc))
                    return
                if time.monotonic() > self.lost_after:
                    self._log("lease lost", "the server was unreachable for the whole lease")
                    return
                await backoff.sleep()

    def _settled_already(self, outcome: Outcome, exc: UserError, status: JobStatus | None) -> None:
        """A report refused because the job moved on (to `status`): a retried report whose
        first try reached the server, a cancel, or a lost lease."""
        if status == JobStatus.CANCELLED:
            self._log("CANCELLED")
        elif (
            exc.code == UserErrorCode.INVALID_STATE
            and outcome.completed
            and status == JobStatus.COMPLETED
        ):
            self._log("COMPLETED")
        elif exc.code == UserErrorCode.INVALID_STATE and not outcome.completed:
            self._log("FAILED", outcome.error)
        else:
            self._log("lease lost", str(exc))

    def _log(self, verdict: str, detail: str = "") -> None:
        """One line per outcome: `job 12 email FAILED, will retry (after 5.041s): why`, the
        time being how long the attempt took, not when the retry comes."""
        elapsed = time.monotonic() - self.started
        suffix = f": {detail}" if detail else ""
        log.info(
            "job %s %s %s (after %.3fs)%s", self.job.id, self.job.type, verdict, elapsed, suffix
        )
