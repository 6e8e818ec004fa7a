"""Subscriptions over graphql-transport-ws that survive dropped connections.

`watch` resumes from the last event's cursor, so the caller sees every event once, in order;
`progress` resubscribes and skips a report it has already seen."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.typing import Subprotocol

from queuelog.client.backoff import Backoff
from queuelog.client.models import ConnectionFailed, Job, JobEvent, JobProgress, QueuelogError
from queuelog.domain.codes import ClientCode, ErrorCode

PROTOCOL = Subprotocol("graphql-transport-ws")
# Close codes of graphql-transport-ws that retrying cannot cure.
REFUSED = {
    4400: ErrorCode.BAD_REQUEST,
    4401: ErrorCode.UNAUTHENTICATED,
    4403: ErrorCode.FORBIDDEN,
}

EVENT_FIELDS = "cursor previousStatus status occurredAt job {{ {job} }}"
WATCH = """subscription($jobId: ID, $type: String, $statuses: [JobStatus!], $after: String) {{
  jobStatusChanged(jobId: $jobId, type: $type, statuses: $statuses, after: $after) {{ {fields} }}
}}"""
PROGRESS = """subscription($jobId: ID!) {{
  jobProgress(jobId: $jobId) {{ progress reportedAt job {{ {job} }} }} }}"""


def ws_url(http_url: str) -> str:
    if http_url.startswith("https://"):
        return "wss://" + http_url.removeprefix("https://")
    if http_url.startswith("http://"):
        return "ws://" + http_url.removeprefix("http://")
    return http_url


async def _send(ws: ClientConnection, message: dict[str, Any]) -> None:
    await ws.send(json.dumps(message))


async def _messages(ws: ClientConnection) -> AsyncGenerator[dict[str, Any], None]:
    """Protocol messages, answering the server's pings on the way."""
    async for frame in ws:
        message = json.loads(frame)
        if message.get("type") == "ping":
            await _send(ws, {"type": "pong"})
        elif message.get("type") != "pong":
            yield message


def _error(errors: list[dict[str, Any]]) -> QueuelogError:
    first = errors[0] if errors else {}
    code = (first.get("extensions") or {}).get("code") or ClientCode.GRAPHQL_ERROR
    return QueuelogError(str(code), str(first.get("message", "")))


def _gone(errors: list[dict[str, Any]]) -> bool:
    return all((e.get("extensions") or {}).get("code") == ErrorCode.NOT_FOUND for e in errors)


async def session(
    url: str, key: str | None, query: str, variables: dict[str, Any]
) -> AsyncGenerator[dict[str, Any], None]:
    """One subscription on one connection: the `data` of each event until the server
    completes it. A dropped connection raises ConnectionFailed; a refusal QueuelogError."""
    init = {} if key is None else {"authorization": f"Bearer {key}"}
    try:
        async with connect(ws_url(url), subprotocols=[PROTOCOL], open_timeout=10) as ws:
            await _send(ws, {"type": "connection_init", "payload": init})
            # Closed here, not by the garbage collector: a caller that stops early leaves
            # no generator for the event loop to finalize after it has closed.
            async with aclosing(_messages(ws)) as messages:
                ack = await anext(messages)
                if ack.get("type") != "connection_ack":
                    raise QueuelogError(
                        ClientCode.PROTOCOL_ERROR, f"expected connection_ack, got {ack}"
                    )
                payload = {"query": query, "variables": variables}
                await _send(ws, {"id": "1", "type": "subscribe", "payload": payload})
                async for message in messages:
                    kind = message.get("type")
                    if kind == "next":
                        body = message.get("payload") or {}
                        if body.get("errors"):
                            if body.get("data") is None and _gone(body["errors"]):
                                continue  # an event whose job the key can no longer read
                            raise _error(body["errors"])
                        yield body["data"]
                    elif kind == "error":
                        raise _error(message.get("payload") or [])
                    elif kind == "complete":
                        return
            raise ConnectionFailed("the server closed the connection")
    except ConnectionClosed as exc:
        code = exc.rcvd.code if exc.rcvd is not None else None
        if code in REFUSED:
            raise QueuelogError(REFUSED[code], exc.rcvd.reason if exc.rcvd else "") from None
        raise ConnectionFailed(f"connection lost: {exc}") from None
    except InvalidStatus as exc:
        if exc.response.status_code in (401, 403):
            raise QueuelogError(ErrorCode.UNAUTHENTICATED, str(exc)) from None
        raise ConnectionFailed(str(exc)) from None
    except (OSError, InvalidHandshake, TimeoutError) as exc:
        raise ConnectionFailed(f"cannot connect: {exc}") from None


async def watch(
    url: str,
    key: str | None,
    job_fields: str,
    *,
    job_id: str | None = None,
    type: str | None = None,
    statuses: list[str] | None = None,
    after: str | None = None,
) -> AsyncGenerator[JobEvent, None]:
    """Every status change the key may see, forever; reconnects and resumes from the last
    cursor. Without `after`, a drop before the first event resumes live."""
    query = WATCH.format(fields=EVENT_FIELDS.format(job=job_fields))
    cursor = after
    backoff = Backoff(cap=5.0)
    while True:
        variables = {"jobId": job_id, "type": type, "statuses": statuses, "after": cursor}
        try:
            async with aclosing(session(url, key, query, variables)) as events:
                async for data in events:
                    event = JobEvent.of(data["jobStatusChanged"])
                    if cursor is not None and int(event.cursor) <= int(cursor):
                        continue
                    cursor = event.cursor
                    backoff.reset()
                    yield event
        except ConnectionFailed:
            pass
        # Also after `complete`: the server completes subscriptions when it shuts down.
        await backoff.sleep()


async def progress(
    url: str,
    key: str | None,
    job_fields: str,
    job_id: str,
    current: Callable[[], Awaitable[Job | None]],
) -> AsyncGenerator[JobProgress, None]:
    """The job's progress reports until it ends; `current` reads the job to tell the end of
    the job from a server shutting down."""
    query = PROGRESS.format(job=job_fields)
    last = None
    backoff = Backoff(cap=5.0)
    while True:
        try:
            async with aclosing(session(url, key, query, {"jobId": str(job_id)})) as reports:
                async for data in reports:
                    report = JobProgress.of(data["jobProgress"])
                    backoff.reset()
                    if report.reported_at != last:
                        last = report.reported_at
                        yield report
            job = await current()
            if job is None or job.status.terminal:
                return
        except ConnectionFailed:
            pass
        await backoff.sleep()
