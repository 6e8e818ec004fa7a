"""`Client` (blocking) and `AsyncClient`: queuelog's API as Python methods.

client = Client()  # QUEUELOG_URL and QUEUELOG_KEY from the environment
job = client.enqueue("email", {"to": "a@example.com"}, priority="high")
for event in client.watch(job_id=job.id):
    print(event.status)
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Mapping, Sequence
from contextlib import aclosing
from datetime import datetime
from typing import Any, TypeVar

import httpx
import orjson

from queuelog.client import operations as ops
from queuelog.client import reports, stream
from queuelog.client.models import (
    BadResponse,
    ConnectionFailed,
    Failed,
    Job,
    JobEvent,
    JobPage,
    JobProgress,
    QueuelogError,
    Reported,
    Settlement,
    UserError,
)
from queuelog.client.operations import Features, Operation
from queuelog.domain.codes import http_code

T = TypeVar("T")
DEFAULT_URL = "http://127.0.0.1:8000/graphql"
_UNSET: Any = ops._UNSET


def _settings(url: str | None, key: str | None) -> tuple[str, str | None]:
    return (
        url or os.environ.get("QUEUELOG_URL") or DEFAULT_URL,
        key or os.environ.get("QUEUELOG_KEY") or None,
    )


JSON_HEADERS = {"Content-Type": "application/json"}


def _body(query: str, variables: Mapping[str, Any] | None) -> bytes:
    return orjson.dumps({"query": query, "variables": dict(variables or {})})


def _data(response: httpx.Response) -> dict[str, Any]:
    if response.status_code >= 500:
        raise ConnectionFailed(f"the server answered HTTP {response.status_code}")
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        if response.is_success:  # a success with no JSON in it: the server's fault
            raise BadResponse(f"HTTP {response.status_code} without a JSON body") from None
        raise QueuelogError(
            http_code(response.status_code), response.text[:200] or "no GraphQL answer"
        ) from None
    return ops.answer(body)


class AsyncClient:
    """queuelog's API for asyncio code. Use as `async with AsyncClient() as client:`."""

    def __init__(
        self, url: str | None = None, key: str | None = None, *, timeout: float = 30.0
    ) -> None:
        self.url, self.key = _settings(url, key)
        headers = {} if self.key is None else {"Authorization": f"Bearer {self.key}"}
        self._http = httpx.AsyncClient(headers=headers, timeout=timeout)
        self._features: Features | None = None

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def execute(
        self,
        query: str,
        variables: Mapping[str, Any] | None = None,
        *,
        http_timeout: float | None = None,
    ) -> dict[str, Any]:
        """Any GraphQL operation; returns its `data` or raises its first error."""
        extra: dict[str, Any] = {} if http_timeout is None else {"timeout": http_timeout}
        try:
            response = await self._http.post(
                self.url, content=_body(query, variables), headers=JSON_HEADERS, **extra
            )
        except httpx.TransportError as exc:
            raise ConnectionFailed(f"{type(exc).__name__}: {exc}") from None
        return _data(response)

    async def features(self) -> Features:
        """What the server offers beyond the first contract; when it will not say (its
        introspection is off), what this package's server offers."""
        if self._features is None:
            try:
                self._features = ops.read(Features.of, await self.execute(ops.FEATURES))
            except ConnectionFailed:
                raise
            except QueuelogError:
                self._features = Features.CURRENT
        return self._features

    async def _run(
        self, build: Callable[[Features], Operation[T]], http_timeout: float | None = None
    ) -> T:
        op = build(await self.features())
        data = await self.execute(op.query, op.variables, http_timeout=http_timeout)
        return ops.read(op.parse, data)

    # -- producers and readers ---------------------------------------------------------

    async def enqueue(
        self,
        type: str,
        payload: Mapping[str, Any] | None = None,
        *,
        priority: str | None = None,
        idempotency_key: str | None = None,
        run_at: datetime | None = None,
        delay: float | None = None,
        max_retries: int | None = None,
        concurrency_key: str | None = None,
    ) -> Job:
        job_input = ops.enqueue_input(
            type, payload, priority=priority, idempotency_key=idempotency_key, run_at=run_at,
            delay=delay, max_retries=max_retries, concurrency_key=concurrency_key,
        )  # fmt: skip
        job, _created = await self._run(lambda f: ops.enqueue(f, job_input))
        return job

    async def enqueue_many(self, jobs: Sequence[Mapping[str, Any]]) -> list[Job]:
        """All or nothing. Each item holds `enqueue`'s arguments: {"type": ..., "payload": ...}."""
        inputs = [ops.enqueue_input(**dict(j)) for j in jobs]
        return await self._run(lambda f: ops.enqueue_many(f, inputs))

    async def job(self, id: str) -> Job | None:
        return await self._run(lambda f: ops.job(f, id))

    async def jobs(
        self,
        *,
        status: str | None = None,
        type: str | None = None,
        first: int = 50,
        after: str | None = None,
    ) -> JobPage:
        """Newest first; each job without its result, error and progress (see `job`)."""
        return await self._run(lambda f: ops.jobs(f, status, type, first, after))

    async def cancel(self, id: str) -> Job:
        return await self._run(lambda f: ops.cancel(f, id))

    async def retry(self, id: str) -> Job:
        return await self._run(lambda f: ops.retry(f, id))

    async def watch(
        self,
        *,
        job_id: str | None = None,
        type: str | None = None,
        statuses: Sequence[str] | None = None,
        after: str | None = None,
    ) -> AsyncGenerator[JobEvent, None]:
        """Status changes as they happen, forever (break to stop). Reconnects after a
        dropped connection and resumes from the last cursor: no gap, no duplicate. Pass
        the `cursor` of the last event you handled as `after` to resume across restarts.
        Without `after`, watching all jobs starts live, and a drop before the first
        event resumes live too; watching one job starts from its latest event."""
        fields = (await self.features()).job_fields()
        if after is None and job_id is not None:
            after = await self._latest_cursor(job_id)
        wanted = None if statuses is None else [str(s).upper() for s in statuses]
        events = stream.watch(
            self.url, self.key, fields, job_id=job_id, type=type, statuses=wanted, after=after
        )
        async with aclosing(events):  # closed with this generator, not by the collector
            async for event in events:
                yield event

    async def _latest_cursor(self, job_id: str) -> str | None:
        data = await self.execute(
            "query($id: ID!) { job(id: $id) { events(first: 100) { cursor } } }", {"id": job_id}
        )
        events = (data["job"] or {}).get("events") or []
        return str(events[-1]["cursor"]) if events else None

    async def progress(self, job_id: str) -> AsyncGenerator[JobProgress, None]:
        """A running job's progress reports (the current one first); ends with the job."""
        fields = (await self.features()).job_fields()
        reports = stream.progress(self.url, self.key, fields, job_id, lambda: self.job(job_id))
        async with aclosing(reports):
            async for report in reports:
                yield report

    # -- workers -----------------------------------------------------------------------

    async def claim(
        self,
        limit: int = 1,
        *,
        types: Sequence[str] | None = None,
        lease_seconds: int | None = None,
        wait_seconds: int = 0,
    ) -> list[Job]:
        """Up to `limit` jobs, now held under a lease; waits up to `wait_seconds` for one
        when the server supports it."""
        wanted = None if types is None else list(types)
        return await self._run(
            lambda f: ops.claim(f, limit, wanted, lease_seconds, wait_seconds),
            http_timeout=None if not wait_seconds else wait_seconds + 30.0,
        )

    async def heartbeat(
        self, id: str, *, lease_seconds: int | None = None, progress: Any = _UNSET
    ) -> Job:
        return await self._run(lambda f: ops.heartbeat(f, id, lease_seconds, progress))

    async def complete(self, id: str, result: Any = None) -> Job:
        return await self._run(lambda f: ops.complete(f, id, result))

    async def fail(self, id: str, error: str, *, retryable: bool = True) -> Failed:
        return await self._run(lambda f: ops.fail(f, id, error, retryable))

    async def settle(self, settlements: Sequence[Settlement]) -> list[Job | Failed | UserError]:
        """Several jobs' outcomes in one request (at most `reports.SETTLE_BATCH`): for
        each, in order, the completed job, the failJob answer, or the refusal of that one
        outcome. An error of the whole request (unreachable server, limits) is raised."""
        return await self._run(lambda f: reports.settle(f, settlements))

    async def settle_and_claim(
        self,
        settlements: Sequence[Settlement],
        limit: int,
        *,
        types: Sequence[str] | None = None,
        lease_seconds: int | None = None,
    ) -> tuple[list[Job | Failed | UserError], list[Job]]:
        """`settle`, then up to `limit` jobs claimed in the same request (it never waits for
        one): a busy worker's one round trip per batch of jobs."""
        wanted = None if types is None else list(types)
        return await self._run(
            lambda f: reports.settle_and_claim(f, settlements, limit, wanted, lease_seconds)
        )

    async def report(self, settlements: Sequence[Settlement]) -> list[Reported]:
        """`settle`, answered briefly: each outcome's `Reported` (the job's id and status,
        or the refusal), which is all a worker needs and costs the server less."""
        return await self._run(lambda f: reports.report(f, settlements))

    async def report_and_claim(
        self,
        settlements: Sequence[Settlement],
        limit: int,
        *,
        types: Sequence[str] | None = None,
        lease_seconds: int | None = None,
    ) -> tuple[list[Reported], list[Job]]:
        """`report`, then up to `limit` jobs claimed in the same request (as
        `settle_and_claim`)."""
        wanted = None if types is None else list(types)
        return await self._run(
            lambda f: reports.report_and_claim(f, settlements, limit, wanted, lease_seconds)
        )


class Client:
    """queuelog's API for blocking code. Use as `with Client() as client:`."""

    def __init__(
        self, url: str | None = None, key: str | None = None, *, timeout: float = 30.0
    ) -> None:
        self.url, self.key = _settings(url, key)
        headers = {} if self.key is None else {"Authorization": f"Bearer {self.key}"}
        self._http = httpx.Client(headers=headers, timeout=timeout)
        self._features: Features | None = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def execute(self, query: str, variables: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Any GraphQL operation; returns its `data` or raises its first error."""
        try:
            response = self._http.post(
                self.url, content=_body(query, variables), headers=JSON_HEADERS
            )
        except httpx.TransportError as exc:
            raise ConnectionFailed(f"{type(exc).__name__}: {exc}") from None
        return _data(response)

    def features(self) -> Features:
        """As AsyncClient.features."""
        if self._features is None:
            try:
                self._features = ops.read(Features.of, self.execute(ops.FEATURES))
            except ConnectionFailed:
                raise
            except QueuelogError:
                self._features = Features.CURRENT
        return self._features

    def _run(self, build: Callable[[Features], Operation[T]]) -> T:
        op = build(self.features())
        return ops.read(op.parse, self.execute(op.query, op.variables))

    def enqueue(
        self,
        type: str,
        payload: Mapping[str, Any] | None = None,
        *,
        priority: str | None = None,
        idempotency_key: str | None = None,
        run_at: datetime | None = None,
        delay: float | None = None,
        max_retries: int | None = None,
        concurrency_key: str | None = None,
    ) -> Job:
        job_input = ops.enqueue_input(
            type, payload, priority=priority, idempotency_key=idempotency_key, run_at=run_at,
            delay=delay, max_retries=max_retries, concurrency_key=concurrency_key,
        )  # fmt: skip
        job, _created = self._run(lambda f: ops.enqueue(f, job_input))
        return job

    def enqueue_many(self, jobs: Sequence[Mapping[str, Any]]) -> list[Job]:
        """All or nothing. Each item holds `enqueue`'s arguments: {"type": ..., "payload": ...}."""
        inputs = [ops.enqueue_input(**dict(j)) for j in jobs]
        return self._run(lambda f: ops.enqueue_many(f, inputs))

    def job(self, id: str) -> Job | None:
        return self._run(lambda f: ops.job(f, id))

    def jobs(
        self,
        *,
        status: str | None = None,
        type: str | None = None,
        first: int = 50,
        after: str | None = None,
    ) -> JobPage:
        return self._run(lambda f: ops.jobs(f, status, type, first, after))

    def cancel(self, id: str) -> Job:
        return self._run(lambda f: ops.cancel(f, id))

    def retry(self, id: str) -> Job:
        return self._run(lambda f: ops.retry(f, id))

    def watch(
        self,
        *,
        job_id: str | None = None,
        type: str | None = None,
        statuses: Sequence[str] | None = None,
        after: str | None = None,
    ) -> Generator[JobEvent, None, None]:
        """As AsyncClient.watch; call it from a thread with no running event loop."""
        return _blocking(
            lambda c: c.watch(job_id=job_id, type=type, statuses=statuses, after=after),
            self.url,
            self.key,
        )

    def progress(self, job_id: str) -> Generator[JobProgress, None, None]:
        """As AsyncClient.progress; call it from a thread with no running event loop."""
        return _blocking(lambda c: c.progress(job_id), self.url, self.key)


def _blocking(
    open_stream: Callable[[AsyncClient], AsyncIterator[T]], url: str, key: str | None
) -> Generator[T, None, None]:
    """Drive an AsyncClient's stream on an event loop of its own, one item at a time."""
    loop = asyncio.new_event_loop()
    client = AsyncClient(url, key)
    items = open_stream(client)
    try:
        while True:
            try:
                yield loop.run_until_complete(anext(items))
            except StopAsyncIteration:
                return
    finally:
        try:
            loop.run_until_complete(_close(items, client))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


async def _close(items: AsyncIterator[Any], client: AsyncClient) -> None:
    """Close the stream and the client, then wait for the tasks they leave behind (e.g. a
    WebSocket's keep-alive) to end, so that no task is destroyed pending with the loop."""
    closer = getattr(items, "aclose", None)
    if closer is not None:
        await closer()
    await client.aclose()
    left = asyncio.all_tasks() - {asyncio.current_task()}
    for task in left:
        task.cancel()
    await asyncio.gather(*left, return_exceptions=True)
