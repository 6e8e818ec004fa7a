"""`Acks`: a worker's reports of finished jobs, several in one request when several are
ready together.

A report goes out at once when no request of reports is on its way; the ones that become
ready meanwhile wait for it and then leave together (a full batch, `SETTLE_BATCH`, leaves at
once), so a lone report is never held back and a busy worker sends one request for many
jobs. While the worker's claim loop is `carrying`, reports wait for it instead: it is about
to claim for the places their handlers freed, and takes them along in the same request."""

from __future__ import annotations

import asyncio
import contextlib

from queuelog.client.clients import AsyncClient
from queuelog.client.models import ConnectionFailed, QueuelogError, Reported, Settlement
from queuelog.client.reports import SETTLE_BATCH
from queuelog.domain import codes
from queuelog.domain.codes import ErrorCode

Answer = Reported
Ready = tuple[Settlement, "asyncio.Future[Answer]"]
# Errors worth retrying: the server was unreachable, restarting or busy.
TRANSIENT = codes.TRANSIENT
TOO_COMPLEX = ErrorCode.QUERY_TOO_COMPLEX  # a server with lower query limits than the default


def transient(exc: Exception) -> bool:
    return isinstance(exc, ConnectionFailed) or (
        isinstance(exc, QueuelogError) and (codes.transient(exc.code))
    )


class Acks:
    """The outcomes of one worker's attempts, on their way to the server."""

    def __init__(self, client: AsyncClient, batch: int = SETTLE_BATCH) -> None:
        self.client = client
        self.batch = batch
        self._ready: list[Ready] = []
        self._sending: set[asyncio.Task[None]] = set()
        self.carrying = False  # the claim loop takes the ready reports with its next claim

    async def send(self, settlement: Settlement) -> Answer:
        """The server's answer for this one outcome; raises what made the whole request
        fail (then nothing is known of this outcome: send it again)."""
        answer: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._ready.append((settlement, answer))
        if self.carrying:
            if len(self._ready) > self.batch and not self._sending:
                self._start()  # more than the claim can carry
        elif len(self._ready) >= self.batch or not self._sending:
            self._start()
        return await answer

    def take(self) -> list[Ready]:
        """The ready reports (a batch at most), for the claim loop to carry; the loop then
        settles each with `answered` or `failed`."""
        self.carrying = False
        taken, self._ready = self._ready[: self.batch], self._ready[self.batch :]
        if self._ready and not self._sending:
            self._start()
        return [(s, answer) for s, answer in taken if not answer.done()]

    def put_back(self, taken: list[Ready]) -> None:
        """Reports the claim loop took but could not carry: they go on their own."""
        self._ready[:0] = taken
        self.release()

    def release(self) -> None:
        """The claim loop will not carry the ready reports after all: send them."""
        self.carrying = False
        if self._ready and not self._sending:
            self._start()

    def _start(self) -> None:
        task = asyncio.create_task(self._flush())
        self._sending.add(task)
        task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sending.discard(task)
        if self._ready and not (self._sending or self.carrying):
            self._start()

    async def _flush(self) -> None:
        await asyncio.sleep(0)  # the reports that become ready in this turn of the loop join
        taken, self._ready = self._ready[: self.batch], self._ready[self.batch :]
        batch = [(s, answer) for s, answer in taken if not answer.done()]
        if not batch:
            return
        try:
            answers = await self.client.report([s for s, _ in batch])
        except QueuelogError as exc:
            if len(batch) > 1 and not transient(exc):
                # One outcome the server could not take must not hide the others': each
                # goes again in a request of its own, and gets its own answer.
                if exc.code == TOO_COMPLEX:
                    self.batch = max(1, len(batch) // 2)
                await asyncio.gather(*(self._one(s, answer) for s, answer in batch))
                return
            _settle_all(batch, exc)
            return
        except BaseException:
            _cancel_all(batch)
            raise
        answered(batch, answers)

    async def _one(self, settlement: Settlement, answer: asyncio.Future[Answer]) -> None:
        try:
            (out,) = await self.client.report([settlement])
        except QueuelogError as exc:
            _settle_all([(settlement, answer)], exc)
            return
        except BaseException:
            _cancel_all([(settlement, answer)])
            raise
        if not answer.done():
            answer.set_result(out)


def answered(batch: list[Ready], answers: list[Answer]) -> None:
    """Each report's answer, in order."""
    for (_, answer), out in zip(batch, answers, strict=True):
        if not answer.done():
            answer.set_result(out)


def failed(batch: list[Ready], exc: BaseException) -> None:
    """The request carrying these reports failed as a whole: each raises it, or is
    cancelled if the request was."""
    if isinstance(exc, Exception):
        _settle_all(batch, exc)
    else:
        _cancel_all(batch)


def _settle_all(batch: list[Ready], exc: Exception) -> None:
    for _, answer in batch:
        if not answer.done():
            answer.set_exception(exc)


def _cancel_all(batch: list[Ready]) -> None:
    for _, answer in batch:
        with contextlib.suppress(asyncio.InvalidStateError):
            answer.cancel()
