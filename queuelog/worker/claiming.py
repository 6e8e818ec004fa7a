"""`ClaimLoop`: a worker's claims. It claims for the places its handlers free, carrying the
reports of the jobs they finished, and starts an attempt for each job a claim brings.

While handlers are quick and the worker claims ahead (`Worker.prefetch`), a claim asks for
at most a request's worth of jobs (as many reports as one request carries) and, while
claims come back full, waits until that many places are free; a second claim may be on
its way while the first is: the server works on one while the worker runs
the jobs of the other. A claim that may wait on the server (long poll) is always alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from typing import Any, Protocol

from queuelog.client.backoff import Backoff
from queuelog.client.clients import AsyncClient
from queuelog.client.models import Job, QueuelogError
from queuelog.worker.acks import TOO_COMPLEX, Acks, Ready, answered, failed, transient
from queuelog.worker.attempt import Attempt

log = logging.getLogger("queuelog.worker")
IDLE_POLL_CAP = 0.5  # between empty claims, when the server cannot wait for a job itself
CLAIM_LINGER = 0.002  # seconds a freed slot waits for others about to free (see `_linger`)
REPORT_HOLD = 0.005  # seconds ready reports wait, with no slot free, for a claim to carry them
IN_FLIGHT_AHEAD = 2  # claims on their way at once while claiming ahead (else one)


class Host(Protocol):
    """What the claims need of the worker they claim for (`queuelog.worker.Worker`)."""

    concurrency: int
    carry: bool
    lease_seconds: int | None
    wait_seconds: int

    def ahead(self) -> int: ...

    def handler_ran(self, seconds: float) -> None: ...

    def attempt(
        self,
        client: AsyncClient,
        acks: Acks,
        job: Job,
        received: float,
        claims: ClaimLoop,
        after: Attempt | None = None,
    ) -> Attempt: ...


class ClaimLoop:
    def __init__(
        self,
        worker: Host,
        client: AsyncClient,
        acks: Acks,
        types: list[str],
        running: dict[asyncio.Task[None], Attempt],
        stopping: asyncio.Event,
    ) -> None:
        self.worker = worker
        self.client = client
        self.acks = acks
        self.types = types
        self.running = running
        self.stopping = stopping
        self.errors = Backoff(first=0.1, cap=10.0)
        self.idle = Backoff(first=0.02, cap=IDLE_POLL_CAP)
        self.freed = asyncio.Event()  # a handler ended, or a claim came back
        self.slots = asyncio.Semaphore(worker.concurrency)
        self.in_flight: dict[asyncio.Task[None], int] = {}  # claims, and the jobs each asked
        self.waiting = False  # the claim on its way may wait on the server
        self.busy = False  # the last claim found jobs: the next one will not wait
        self.full = False  # the last claim found as many jobs as it asked for
        self.waiting_for_slot = False
        self.failed: BaseException | None = None  # what a claim raised, for `run` to raise
        self.cut = False  # the stop cut a waiting claim: claim no more

    def handled(self, seconds: float | None) -> None:
        """A handler is over: its slot is free, and the claim for it carries its report."""
        if seconds is not None:
            self.worker.handler_ran(seconds)
        self.freed.set()
        if self.waiting_for_slot and self.worker.carry:
            self.acks.carrying = True

    async def run(self) -> None:
        """Claim until the worker stops (or a claim fails for good: that is raised), then
        let the claims on their way come back (a waiting one is cut by the stop)."""
        try:
            await self._claims()
        except BaseException:
            for task in self.in_flight:  # cancelled (not stopped): nobody runs their jobs
                task.cancel()
            raise
        finally:
            if self.in_flight:
                await asyncio.wait(list(self.in_flight))
        if self.failed is not None:
            raise self.failed

    async def _claims(self) -> None:
        while not (self.stopping.is_set() or self.cut or self.failed):
            ahead = self.worker.ahead()
            held = self.worker.concurrency + ahead
            # A job is held from its claim until its handler is over (its outcome may
            # still be on its way); at most as many more may wait for that answer.
            handling = sum(not a.handled for a in self.running.values())
            asked = sum(self.in_flight.values())
            free = min(held - handling, 2 * held - len(self.running)) - asked
            # Claiming ahead while claims come back full, a claim waits for a request's
            # worth of free places (as many reports as one request carries) while jobs run
            # or another claim is on its way; at most that many, so that the reports of its
            # jobs go in one request.
            batch = min(ahead, self.acks.batch) if ahead else 100
            in_flight_max = IN_FLIGHT_AHEAD if ahead else 1
            may_send = not self.waiting and len(self.in_flight) < in_flight_max
            for_batch = ahead and self.full and (handling or self.in_flight)
            if not may_send or free <= 0 or (for_batch and free < batch):
                await self._pause(held)
                continue
            self._send(min(free, batch))

    async def _pause(self, held: int) -> None:
        """Until a slot frees or a claim comes back. Ready reports wait a moment for the
        next claim to carry them, then go on their own: their answers may be what frees a
        slot."""
        self.freed.clear()
        self.waiting_for_slot = True
        await _wait(self.freed, REPORT_HOLD)
        if not self.freed.is_set():
            self.acks.release()
            await _either(self.freed, self.stopping)
        await self._linger()
        self.waiting_for_slot = False

    async def _linger(self) -> None:
        """Handlers that end together free their slots together: wait a moment for the
        others still running, so that one claim (carrying their reports) takes them all."""
        deadline = time.monotonic() + CLAIM_LINGER
        while (left := deadline - time.monotonic()) > 0 and not self.stopping.is_set():
            if all(a.handled for a in self.running.values()):
                return
            self.freed.clear()
            await _wait(self.freed, left)

    def _send(self, limit: int) -> None:
        riders = self.acks.take() if self.worker.carry else []
        # Reports that become ready during a claim that answers at once wait for the next
        # claim; a claim that may wait on the server must not hold them back.
        quick = bool(riders) or self.busy or bool(self.in_flight)
        if quick and self.worker.carry:
            self.acks.carrying = True
        else:
            self.acks.release()
        self.waiting = not quick
        task = asyncio.create_task(self._claim(riders, limit, wait=not quick))
        self.in_flight[task] = limit
        task.add_done_callback(self._came_back)

    def _came_back(self, task: asyncio.Task[None]) -> None:
        self.in_flight.pop(task, None)
        if not task.cancelled() and (exc := task.exception()) is not None:
            self.failed = exc
        self.freed.set()

    async def _claim(self, riders: list[Ready], limit: int, *, wait: bool) -> None:
        """One claim, and an attempt for each job it brings."""
        try:
            if riders:
                jobs: list[Job] | None = await self._carrying(riders, limit)
            else:
                jobs = await self._alone(limit, wait=wait)
        except QueuelogError as exc:
            self.busy = self.full = False
            if not transient(exc):
                raise
            delay = self.errors.next_delay()
            log.warning("claim failed (%s); retrying in %.2fs", exc, delay)
            await _wait(self.stopping, delay)
            return
        finally:
            if wait:
                self.waiting = False
        if jobs is None:
            self.cut = True
            return
        self.busy, self.full = bool(jobs), len(jobs) == limit
        self.errors.reset()
        received = time.monotonic()
        held = {a.job.id: a for a in self.running.values()}
        for job in jobs:
            before = held.get(job.id)
            if before is not None and not before.released:  # a faulty server's repeat
                log.warning("job %s came in a claim while this worker holds it", job.id)
                continue
            attempt = self.worker.attempt(self.client, self.acks, job, received, self, before)
            held[job.id] = attempt
            task = asyncio.create_task(attempt.run())
            self.running[task] = attempt
            task.add_done_callback(functools.partial(_ended, self.running, self.freed))
        if jobs:
            self.idle.reset()
        elif not (await self.client.features()).wait_seconds:
            await _wait(self.stopping, self.idle.next_delay())

    async def _alone(self, limit: int, *, wait: bool) -> list[Job] | None:
        """The jobs of one claim, or None when the worker stopped while the claim waited:
        the request is then cut, and the server gives back any job it took for it."""
        worker = self.worker
        claim = asyncio.create_task(
            self.client.claim(
                limit,
                types=self.types,
                lease_seconds=worker.lease_seconds,
                wait_seconds=worker.wait_seconds if wait else 0,
            )
        )
        try:
            await _first_of([claim, self.stopping.wait()])
        finally:
            if not claim.done():
                claim.cancel()
        try:
            return await claim
        except asyncio.CancelledError:
            if claim.cancelled() and self.stopping.is_set():
                return None
            raise

    async def _carrying(self, riders: list[Ready], limit: int) -> list[Job]:
        """Send the ready reports and a claim that answers at once, in one request. A server
        that refuses the combined request as too complex gets them apart from now on."""
        settlements = [s for s, _ in riders]
        try:
            answers, jobs = await self.client.report_and_claim(
                settlements, limit, types=self.types, lease_seconds=self.worker.lease_seconds
            )
        except QueuelogError as exc:
            if exc.code != TOO_COMPLEX:
                failed(riders, exc)
                raise
            log.info("the server refused reports carried by a claim; sending them apart")
            self.worker.carry = False
            self.acks.put_back(riders)
            return []
        except BaseException as exc:
            failed(riders, exc)
            raise
        answered(riders, answers)
        return jobs


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
