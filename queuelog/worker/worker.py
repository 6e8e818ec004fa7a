"""`Worker`: claims jobs in batches, runs their handlers, and stops cleanly on a signal.

worker = Worker(concurrency=8)  # QUEUELOG_URL and QUEUELOG_KEY from the environment

@worker.handler("email")
async def send_email(job):
    ...  # the return value is the job's result; an exception fails it

worker.run()
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import time
from collections.abc import Callable, Sequence
from typing import Any

from queuelog.client.backoff import Backoff
from queuelog.client.clients import AsyncClient
from queuelog.client.models import Job, QueuelogError
from queuelog.worker.acks import TOO_COMPLEX, Acks, Ready, answered, failed, transient
from queuelog.worker.attempt import Attempt, Handler

log = logging.getLogger("queuelog.worker")
IDLE_POLL_CAP = 0.5  # between empty claims, when the server cannot wait for a job itself
CLAIM_LINGER = 0.002  # seconds a freed slot waits for others about to free (see `_linger`)
REPORT_HOLD = 0.005  # seconds ready reports wait, with no slot free, for a claim to carry them
QUICK_HANDLER = 0.05  # seconds: handlers quicker than this on average get jobs claimed ahead
QUICK_WEIGHT = 0.2  # the weight of the latest handler's time in that average


class Worker:
    """Runs handlers for claimed jobs, `concurrency` at a time.

    `lease_seconds` is the lease asked for at each claim and heartbeat (default: the
    server's); `timeout` the longest a handler may run (a handler's own wins); `grace_seconds`
    how long running handlers may finish after SIGTERM/SIGINT before their jobs are failed
    as retryable; `wait_seconds` how long each claim waits on the server for a job.

    While handlers are quick (under QUICK_HANDLER on average), the worker claims up to
    `prefetch` jobs (default: three times `concurrency`) ahead of its free slots: they wait in the
    worker, heartbeated, and start in claim order as handlers end, so a slot never idles for
    the round trip of a claim. Slower handlers get no jobs ahead: a job held behind a long
    one would wait while another worker could run it. `prefetch=0` turns it off."""

    def __init__(
        self,
        url: str | None = None,
        key: str | None = None,
        *,
        concurrency: int = 10,
        types: Sequence[str] | None = None,
        lease_seconds: int | None = None,
        timeout: float | None = None,
        grace_seconds: float = 30.0,
        wait_seconds: int = 5,
        prefetch: int | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if prefetch is not None and prefetch < 0:
            raise ValueError("prefetch must be 0 or more")
        self.url = url
        self.key = key
        self.concurrency = concurrency
        self.types = None if types is None else list(types)
        self.lease_seconds = lease_seconds
        self.timeout = timeout
        self.grace_seconds = grace_seconds
        self.wait_seconds = wait_seconds
        self._prefetch = prefetch
        self.handler_seconds: float | None = None  # the handlers' recent average run
        self.handlers: dict[str, tuple[Handler, float | None]] = {}
        # Reports of finished jobs ride with the claim for their freed places.
        self.carry = True
        self._stopping: asyncio.Event | None = None
        self._signals = 0

    @property
    def prefetch(self) -> int:
        """The most jobs held beyond `concurrency` while handlers are quick."""
        return 3 * self.concurrency if self._prefetch is None else self._prefetch

    @prefetch.setter
    def prefetch(self, jobs: int) -> None:
        if jobs < 0:
            raise ValueError("prefetch must be 0 or more")
        self._prefetch = jobs

    def handler(self, type: str, *, timeout: float | None = None) -> Callable[[Handler], Handler]:
        """Register the handler of one job type (a coroutine function or a plain function)."""

        def register(fn: Handler) -> Handler:
            self.handlers[type] = (fn, timeout)
            return fn

        return register

    def claimed_types(self) -> list[str]:
        types = self.types if self.types is not None else sorted(self.handlers)
        missing = [t for t in types if t not in self.handlers]
        if missing or not types:
            raise ValueError(f"no handler for the job type(s): {', '.join(missing) or '(none)'}")
        return types

    def run(self) -> None:
        """Work until SIGTERM or SIGINT, then drain (see the class) and return. A second
        signal ends the process at once."""
        asyncio.run(self.serve(handle_signals=True))

    def stop(self) -> None:
        """Stop claiming, and drain. Call from the worker's event loop."""
        if self._stopping is not None:
            self._stopping.set()

    def _on_signal(self) -> None:
        self._signals += 1
        if self._signals > 1:
            log.warning("second signal: exiting now")
            logging.shutdown()
            os._exit(1)
        log.info("stopping: no new jobs; running ones get %gs to finish", self.grace_seconds)
        self.stop()

    async def serve(self, *, handle_signals: bool = False) -> None:
        types = self.claimed_types()
        self._stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self._on_signal)
        running: dict[asyncio.Task[None], Attempt] = {}
        async with AsyncClient(self.url, self.key) as client:
            acks = Acks(client)
            log.info("worker up: %s, concurrency %d", ",".join(types), self.concurrency)
            try:
                try:
                    await self._claim_loop(client, acks, types, running)
                finally:
                    acks.release()  # no claim will carry what is ready
                await self._drain(running)
            finally:
                for task in running:
                    task.cancel()
                if handle_signals:
                    for sig in (signal.SIGTERM, signal.SIGINT):
                        loop.remove_signal_handler(sig)

    async def _claim_loop(
        self,
        client: AsyncClient,
        acks: Acks,
        types: list[str],
        running: dict[asyncio.Task[None], Attempt],
    ) -> None:
        assert self._stopping is not None
        stopping = self._stopping
        errors = Backoff(first=0.1, cap=10.0)
        idle = Backoff(first=0.02, cap=IDLE_POLL_CAP)
        freed = asyncio.Event()
        slots = asyncio.Semaphore(self.concurrency)
        waiting_for_slot = False
        busy = False  # the last claim found jobs: the next one will not wait on the server

        def handled(seconds: float | None) -> None:
            # The handler's slot is free: the claim for it will carry the handler's report.
            if seconds is not None:
                self._handler_ran(seconds)
            freed.set()
            if waiting_for_slot and self.carry:
                acks.carrying = True

        while not stopping.is_set():
            # A job is held from its claim until its handler is over (its outcome may still
            # be on its way); at most as many more may wait for their outcome's answer.
            ahead = self._ahead()
            held = self.concurrency + ahead
            handling = sum(not a.handled for a in running.values())
            free = min(held - handling, 2 * held - len(running))
            # Claiming ahead, a claim waits for a request's worth of free places (as many
            # reports as one request carries), unless nothing is left to wait for.
            batch = min(held, acks.batch) if ahead else 1
            if free < batch and (free <= 0 or handling):
                # Ready reports wait a moment for the claim of the next freed slot to carry
                # them, then go on their own: their answers may be what frees a slot.
                freed.clear()
                waiting_for_slot = True
                await _wait(freed, REPORT_HOLD)
                if not freed.is_set():
                    acks.release()
                    await _either(freed, stopping)
                await self._linger(running, freed, stopping)
                waiting_for_slot = False
                continue
            riders = acks.take() if self.carry else []
            # Reports that become ready during a claim that answers at once wait for the
            # next claim; a claim that may wait on the server must not hold them back.
            quick = bool(riders) or busy
            if quick and self.carry:
                acks.carrying = True
            else:
                acks.release()
            try:
                if riders:
                    jobs: list[Job] | None = await self._claim_carrying(
                        client, acks, riders, types, min(free, batch if ahead else 100)
                    )
                else:
                    limit = min(free, batch if ahead else 100)
                    jobs = await self._claim(client, types, limit, wait=not busy)
            except QueuelogError as exc:
                busy = False
                if not transient(exc):
                    raise
                delay = errors.next_delay()
                log.warning("claim failed (%s); retrying in %.2fs", exc, delay)
                await _wait(stopping, delay)
                continue
            if jobs is None:
                return
            busy = bool(jobs)
            errors.reset()
            received = time.monotonic()
            for job in jobs:
                attempt = self._attempt(client, acks, job, received, slots, handled)
                task = asyncio.create_task(attempt.run())
                running[task] = attempt
                task.add_done_callback(functools.partial(_ended, running, freed))
            if jobs:
                idle.reset()
            elif not (await client.features()).wait_seconds:
                await _wait(stopping, idle.next_delay())

    def _ahead(self) -> int:
        """How many jobs to hold beyond the slots: `prefetch` while handlers are quick."""
        quick = self.handler_seconds is not None and self.handler_seconds < QUICK_HANDLER
        return self.prefetch if quick else 0

    def _handler_ran(self, seconds: float) -> None:
        last = self.handler_seconds
        self.handler_seconds = seconds if last is None else last + QUICK_WEIGHT * (seconds - last)

    async def _linger(
        self,
        running: dict[asyncio.Task[None], Attempt],
        freed: asyncio.Event,
        stopping: asyncio.Event,
    ) -> None:
        """Handlers that end together free their slots together: wait a moment for the
        others still running, so that one claim (carrying their reports) takes them all."""
        deadline = time.monotonic() + CLAIM_LINGER
        while (left := deadline - time.monotonic()) > 0 and not stopping.is_set():
            if all(a.handled for a in running.values()):
                return
            freed.clear()
            await _wait(freed, left)

    async def _claim(
        self, client: AsyncClient, types: list[str], limit: int, *, wait: bool = True
    ) -> list[Job] | None:
        """The jobs of one claim, or None when the worker stopped while the claim waited:
        the request is then cut, and the server gives back any job it took for it."""
        assert self._stopping is not None
        claim = asyncio.create_task(
            client.claim(
                limit,
                types=types,
                lease_seconds=self.lease_seconds,
                wait_seconds=self.wait_seconds if wait else 0,
            )
        )
        try:
            await _first_of([claim, self._stopping.wait()])
        finally:
            if not claim.done():
                claim.cancel()
        try:
            return await claim
        except asyncio.CancelledError:
            if claim.cancelled() and self._stopping.is_set():
                return None
            raise

    async def _claim_carrying(
        self,
        client: AsyncClient,
        acks: Acks,
        riders: list[Ready],
        types: list[str],
        limit: int,
    ) -> list[Job]:
        """Send the ready reports and a claim that answers at once, in one request. A server
        that refuses the combined request as too complex gets them apart from now on."""
        settlements = [s for s, _ in riders]
        try:
            answers, jobs = await client.report_and_claim(
                settlements, limit, types=types, lease_seconds=self.lease_seconds
            )
        except QueuelogError as exc:
            if exc.code != TOO_COMPLEX:
                failed(riders, exc)
                raise
            log.info("the server refused reports carried by a claim; sending them apart")
            self.carry = False
            acks.put_back(riders)
            return []
        except BaseException as exc:
            failed(riders, exc)
            raise
        answered(riders, answers)
        return jobs

    def _attempt(
        self,
        client: AsyncClient,
        acks: Acks,
        job: Job,
        received: float,
        slots: asyncio.Semaphore,
        on_handled: Callable[[float | None], None],
    ) -> Attempt:
        handler, timeout = self.handlers[job.type]
        return Attempt(
            client,
            acks,
            job,
            handler,
            lease_seconds=self.lease_seconds,
            timeout=timeout if timeout is not None else self.timeout,
            received_at=received,
            slots=slots,
            on_handled=on_handled,
        )

    async def _drain(self, running: dict[asyncio.Task[None], Attempt]) -> None:
        if not running:
            return
        _done, late = await asyncio.wait(list(running), timeout=self.grace_seconds)
        if late:
            log.warning("%d job(s) still running after the grace period: failing them", len(late))
            for task in late:
                running[task].stop("shutdown")
            await asyncio.wait(late, timeout=30)


async def _wait(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()


def _ended(
    running: dict[asyncio.Task[None], Attempt], freed: asyncio.Event, task: asyncio.Task[None]
) -> None:
    running.pop(task, None)
    freed.set()


async def _either(a: asyncio.Event, b: asyncio.Event) -> None:
    waits = [asyncio.create_task(a.wait()), asyncio.create_task(b.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


async def _first_of(waitables: list[Any]) -> None:
    tasks = [asyncio.ensure_future(w) for w in waitables]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks[-1:]:  # only the stop event's waiter is ours to cancel
            t.cancel()
