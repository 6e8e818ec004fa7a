"""`Worker`: claims jobs in batches, runs their handlers, and stops cleanly on a signal.

worker = Worker(concurrency=8)  # QUEUELOG_URL and QUEUELOG_KEY from the environment

@worker.handler("email")
async def send_email(job):
    ...  # the return value is the job's result; an exception fails it

worker.run()
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable, Sequence

from queuelog.client.clients import AsyncClient
from queuelog.client.models import Job, QueuelogError
from queuelog.client.reports import SETTLE_BATCH
from queuelog.worker.acks import Acks
from queuelog.worker.attempt import Attempt, Handler
from queuelog.worker.claiming import ClaimLoop
from queuelog.worker.job import RunningJob

log = logging.getLogger("queuelog.worker")
QUICK_HANDLER = 0.05  # seconds: handlers quicker than this on average get jobs claimed ahead
QUICK_WEIGHT = 0.2  # the weight of the latest handler's time in that average


class NoHandler(Exception):
    """A claim brought a job of a type this worker has no handler for (a faulty server)."""


async def _no_handler(job: RunningJob) -> None:
    """The handler of a job of a type the worker did not claim: it fails, retryable, so
    that a worker with its handler may run it."""
    raise NoHandler(f"this worker has no handler for the job type {job.type!r}")


class Worker:
    """Runs handlers for claimed jobs, `concurrency` at a time.

    `lease_seconds` is the lease asked for at each claim and heartbeat (default: the
    server's); `timeout` the longest a handler may run (a handler's own wins); `grace_seconds`
    how long running handlers may finish after SIGTERM/SIGINT before their jobs are failed
    as retryable; `wait_seconds` how long each claim waits on the server for a job.

    While handlers are quick (under QUICK_HANDLER on average), the worker claims up to
    `prefetch` jobs ahead of its free slots (default: two requests' worth, and at least
    three times `concurrency`): they wait in the worker, heartbeated, and start in claim
    order as handlers end, so a slot never idles for the round trip of a claim, and one
    claim is on its way while the jobs of another run (`worker.claiming`). Slower handlers
    get no jobs ahead: a job held behind a long one would wait while another worker could
    run it. `prefetch=0` turns it off."""

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
        if self._prefetch is not None:
            return self._prefetch
        # Two requests' worth of jobs, so that one claim is on its way while the jobs of
        # the other run; and at least three times `concurrency`.
        return max(3 * self.concurrency, 2 * SETTLE_BATCH - self.concurrency)

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
            failure: QueuelogError | None = None
            try:
                try:
                    await ClaimLoop(self, client, acks, types, running, self._stopping).run()
                except QueuelogError as exc:  # refused for good (a key or role): stop
                    log.error("claims refused, stopping: %s", exc)
                    failure = exc
                finally:
                    acks.release()  # no claim will carry what is ready
                # The jobs it holds are run and reported, not abandoned to their leases.
                await self._drain(running)
            finally:
                for task in running:
                    task.cancel()
                if handle_signals:
                    for sig in (signal.SIGTERM, signal.SIGINT):
                        loop.remove_signal_handler(sig)
        if failure is not None:
            raise failure

    def ahead(self) -> int:
        """How many jobs to hold beyond the slots: `prefetch` while handlers are quick."""
        quick = self.handler_seconds is not None and self.handler_seconds < QUICK_HANDLER
        return self.prefetch if quick else 0

    def handler_ran(self, seconds: float) -> None:
        """A handler ran `seconds`: into the average that decides claiming ahead."""
        last = self.handler_seconds
        self.handler_seconds = seconds if last is None else last + QUICK_WEIGHT * (seconds - last)

    def attempt(
        self,
        client: AsyncClient,
        acks: Acks,
        job: Job,
        received: float,
        claims: ClaimLoop,
        after: Attempt | None = None,
    ) -> Attempt:
        """An attempt at `job`; its handler starts once `after` (an earlier attempt at the
        same job whose handler's thread runs on) is over."""
        handler, timeout = self.handlers.get(job.type, (_no_handler, None))
        return Attempt(
            client,
            acks,
            job,
            handler,
            lease_seconds=self.lease_seconds,
            timeout=timeout if timeout is not None else self.timeout,
            received_at=received,
            slots=claims.slots,
            on_handled=claims.handled,
            after=None if after is None else after.returned,
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
