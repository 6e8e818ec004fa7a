"""The differential harness: the two runs of a script (as shipped, and with every request
sent the generic way), which path each request took, and what is normalised between the
two transcripts before they are compared."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from queuelog.api.fastpath.prepared import Prepared, PreparedOperations
from queuelog.api.schema import QueuelogSchema
from queuelog.config import Settings
from queuelog.edge.app import create_app
from queuelog.edge.view import SpecGraphQL
from queuelog.service.models import Priority, Role
from tests.templates import fresh_database

GRAPHQL_RESPONSE = "application/graphql-response+json"
JSON = "application/json"

PREPARED = "prepared"  # answered by execute_prepared
FALLBACK = "fallback"  # prepared, but the variables do not coerce: answered the generic way
GENERIC = "generic"  # not preparable: PreparedOperations.get is None

SECRETS = {
    "producer": "ql_prepared_producer_secret_0123456789",
    "producer2": "ql_prepared_producer2_secret_012345678",
    "worker": "ql_prepared_worker_secret_01234567890",
    "worker2": "ql_prepared_worker2_secret_0123456789",
    "admin": "ql_prepared_admin_secret_012345678901",
}

# A time within the schedule horizon, the same for both runs.
RUN_AT = (datetime.now(UTC) + timedelta(days=30)).replace(microsecond=0).isoformat()
_SHIPPED_GET = PreparedOperations.get  # before any run instruments it
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[+-]\d{2}:?\d{2}|Z)?")


def _settings(url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": url,
        "job_types": ("email", "pdf", "sync"),
        "payload_max_bytes": 1024,
        "backoff_base_seconds": 3600.0,  # a retried job is not claimable again during a run
        "maintenance_interval_seconds": 3600.0,
        "rate_limit_burst": 100_000,
        "graphiql": False,
    }
    values.update(overrides)
    return Settings(**values)


def _view(app: Starlette) -> SpecGraphQL:
    for route in app.routes:
        if isinstance(route, Route) and route.path == "/graphql":
            view = route.endpoint
            assert isinstance(view, SpecGraphQL)
            return view
    raise AssertionError("no /graphql route")


def normalise(value: Any, key: str | None = None) -> Any:
    """What must differ between two runs: the clock's readings and generated secrets."""
    if isinstance(value, dict):
        return {k: normalise(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, str):
        if key == "secret":
            return "<secret>"
        return _TIME.sub("<time>", value)
    return value


@dataclass
class Exchange:
    name: str
    status: int
    headers: dict[str, str]
    body: Any
    text: str  # the normalised body as sent, key order included
    logs: list[tuple[str, str, str, str | None]]


class _Logs(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def take(self) -> list[tuple[str, str, str, str | None]]:
        out = []
        for r in self.records:
            exc = r.exc_info[1] if r.exc_info else None
            exc_text = None if exc is None else f"{type(exc).__name__}: {exc}"
            out.append((r.name, r.levelname, _TIME.sub("<time>", r.getMessage()), exc_text))
        self.records.clear()
        return out


class Run:
    """One run of the script against one fresh app: the requests it sent, what came back,
    and which path each took."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        schema: QueuelogSchema,
        monkeypatch: pytest.MonkeyPatch,
        prepared: bool,
    ) -> None:
        self.client = client
        self.schema = schema
        self.monkeypatch = monkeypatch
        self.prepared = prepared
        self.exchanges: list[Exchange] = []
        self.routes: list[tuple[str, str, str]] = []  # (name, expected, taken)
        self.documents: list[tuple[str, Any, Any, str]] = []  # name, query, op, expect
        self.events: list[str] = []
        self.logs = _Logs()
        self.keys: Any = None

    # -- instrumentation: which path a request took --------------------------------------

    def instrument(self) -> None:
        run = self
        get, execute = PreparedOperations.get, QueuelogSchema.execute_prepared

        def recording_get(
            self: PreparedOperations, query: str, operation_name: str | None
        ) -> Prepared | None:
            prepared = get(self, query, operation_name) if run.prepared else None
            run.events.append("get:prepared" if prepared is not None else "get:none")
            return prepared

        async def recording_execute(self: QueuelogSchema, *args: Any, **kwargs: Any) -> Any:
            run.events.append("execute")
            try:
                result = await execute(self, *args, **kwargs)
            except asyncio.CancelledError:
                run.events.append("execute:cancelled")
                raise
            run.events.append("execute:none" if result is None else "execute:result")
            return result

        self.monkeypatch.setattr(PreparedOperations, "get", recording_get)
        self.monkeypatch.setattr(QueuelogSchema, "execute_prepared", recording_execute)

    def _taken(self) -> str:
        events, self.events = self.events, []
        if "execute:result" in events or "execute:cancelled" in events:
            return PREPARED
        if "execute:none" in events:
            return FALLBACK
        assert "execute" not in events, events
        return GENERIC

    # -- the requests ----------------------------------------------------------------------

    async def post(
        self,
        name: str,
        query: str,
        variables: dict[str, Any] | None = None,
        *,
        key: str | None = None,
        operation_name: str | None = None,
        expect: str = PREPARED,
        accept: str = GRAPHQL_RESPONSE,
        body: dict[str, Any] | None = None,
        document: bool = True,
    ) -> Any:
        """POST one operation; returns the JSON body (not normalised). `document`: whether
        the schema's cache must agree with `expect` about the document (not for bodies the
        view sends the generic way whatever their document)."""
        if body is None:
            body = {"query": query}
            if variables is not None:
                body["variables"] = variables
            if operation_name is not None:
                body["operationName"] = operation_name
        headers = {
            "Accept": accept,
            "Content-Type": JSON,
            "X-Request-Id": f"req-{len(self.exchanges)}",
        }
        if key is not None:
            headers["Authorization"] = f"Bearer {SECRETS[key]}"
        self.events.clear()
        response = await self.client.post("/graphql", json=body, headers=headers)
        self.routes.append((name, expect, self._taken()))
        if document:
            self.documents.append((name, body["query"], body.get("operationName"), expect))
        parsed = response.json()
        normalised = normalise(parsed)
        self.exchanges.append(
            Exchange(
                name=name,
                status=response.status_code,
                headers={k: v for k, v in response.headers.items() if k != "content-length"},
                body=normalised,
                text=json.dumps(normalised),
                logs=self.logs.take(),
            )
        )
        return parsed

    @contextmanager
    def patched(self, target: Any, name: str, value: Any) -> Iterator[None]:
        with self.monkeypatch.context() as m:
            m.setattr(target, name, value)
            yield


Script = Callable[[Run], Awaitable[None]]


@asynccontextmanager
async def _app(settings: Settings) -> AsyncIterator[tuple[Starlette, httpx.AsyncClient]]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        keys = app.state.services.keys
        await keys.create(
            "producer-a", Role.PRODUCER, ["email", "pdf"], Priority.HIGH, secret=SECRETS["producer"]
        )
        await keys.create(
            "producer-b", Role.PRODUCER, None, Priority.LOW, secret=SECRETS["producer2"]
        )
        await keys.create("worker-a", Role.WORKER, None, secret=SECRETS["worker"])
        await keys.create("worker-b", Role.WORKER, ["sync"], secret=SECRETS["worker2"])
        await keys.create("root", Role.ADMIN, None, Priority.CRITICAL, secret=SECRETS["admin"])
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://queuelog") as client:
            yield app, client


async def run_once(
    script: Script,
    backend: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    prepared: bool,
    **settings: Any,
) -> Run:
    with fresh_database(backend, tmp_path) as url, monkeypatch.context() as m:
        async with _app(_settings(url, **settings)) as (app, client):
            schema = _view(app).schema
            assert isinstance(schema, QueuelogSchema)
            run = Run(client, schema, m, prepared)
            run.keys = app.state.services.keys
            run.instrument()
            root = logging.getLogger()
            root.addHandler(run.logs)
            try:
                await script(run)
            finally:
                root.removeHandler(run.logs)
            if prepared:
                _check_documents(run)
    return run


def _check_documents(run: Run) -> None:
    """The shipped run took the path the script expected for every request, and the
    schema's own cache agrees on which documents are prepared."""
    wrong = [(n, e, t) for n, e, t in run.routes if e != t]
    assert not wrong, f"requests that took another path than expected: {wrong}"
    for name, query, operation_name, expect in run.documents:
        got = _SHIPPED_GET(run.schema.prepared, query, operation_name)
        if expect == GENERIC:
            assert got is None, name
        else:
            assert got is not None, name


async def differential(
    script: Script,
    backend: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    logs: bool = True,
    **settings: Any,
) -> tuple[Run, Run]:
    """Run `script` as shipped and with every request sent the generic way; assert the two
    transcripts are equal, request by request (and the errors logged, unless `logs` is
    False)."""
    shipped = await run_once(script, backend, tmp_path, monkeypatch, True, **settings)
    generic = await run_once(script, backend, tmp_path, monkeypatch, False, **settings)
    assert all(taken == GENERIC for _, _, taken in generic.routes)
    assert [e.name for e in shipped.exchanges] == [e.name for e in generic.exchanges]
    differences = []
    for a, b in zip(shipped.exchanges, generic.exchanges, strict=True):
        for what in ("status", "headers", "body", "text", *(("logs",) if logs else ())):
            if getattr(a, what) != getattr(b, what):
                differences.append((a.name, what, getattr(a, what), getattr(b, what)))
    assert not differences, "\n\n".join(
        f"{name}: {what} differs\n  prepared: {x!r}\n  generic:  {y!r}"
        for name, what, x, y in differences
    )
    return shipped, generic
