"""GET /healthz and GET /readyz answer without a key; /readyz is 503 while the database does
not answer or its migrations are not this code's newest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from queuelog import fences
from queuelog.config import Settings
from queuelog.edge.health import Readiness
from queuelog.runtime import open_services
from queuelog.storage.db import Database
from queuelog.storage.migrate import head_revision, migrate
from tests.support import LiveServer
from tests.templates import fresh_database


async def test_health_and_readiness_need_no_key(live: tuple[LiveServer, str]) -> None:
    server, _ = live
    base = server.url.removesuffix("/graphql")
    async with httpx.AsyncClient() as client:
        health = await client.get(f"{base}/healthz")
        ready = await client.get(f"{base}/readyz")
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert ready.status_code == 200
    assert ready.json() == {
        "status": "ok",
        "migration": head_revision(),
        "fences": {
            "bounded_http_protocol": "on",
            "strict_websocket": "on",
            "prepared_operations": "on",
        },
    }


def test_readiness_says_which_fences_are_off(
    monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    from queuelog.fences import uvicorn_http

    monkeypatch.setattr(uvicorn_http, "TESTED", {"uvicorn": "==0.0.1"})
    off = settings.model_copy(update={"strict_websocket": False})
    states = fences.states(off)
    assert states["strict_websocket"] == "switched off"
    assert states["bounded_http_protocol"].startswith("unavailable: it was not tested with uvicorn")
    assert states["prepared_operations"] == "on"


async def _readiness(db: Database) -> tuple[int, dict[str, Any]]:
    response = await Readiness(db, Settings()).respond(None)  # type: ignore[arg-type]  # it reads none
    return response.status_code, orjson.loads(bytes(response.body))


async def test_not_ready_before_the_newest_migration(backend: str, tmp_path: Path) -> None:
    with fresh_database(backend, tmp_path, migrated=False) as url:
        await _ready_after_the_newest_migration(Settings(database_url=url))


async def _ready_after_the_newest_migration(settings: Settings) -> None:
    s = open_services(settings)
    try:
        migrate(s.db, "0004")
        status, body = await _readiness(s.db)
        assert status == 503
        assert body["reason"] == "migrations" and body["expected"] == head_revision()
        migrate(s.db)
        assert (await _readiness(s.db))[0] == 200
    finally:
        s.db.close()


async def test_not_ready_while_the_database_does_not_answer(backend: str, tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    url = (
        f"sqlite:///{path}"
        if backend == "sqlite"
        else "postgresql://postgres@127.0.0.1:5432/queuelog_no_such_database"
    )
    db = Database(url)
    if backend == "sqlite":
        path.write_bytes(b"not a database, " * 256)
    try:
        status, body = await _readiness(db)
    finally:
        db.close()
    assert status == 503 and body == {"status": "unavailable", "reason": "database"}


def test_a_served_process_is_ready(server: LiveServer) -> None:
    ready = httpx.get(server.url.replace("/graphql", "/readyz"))
    assert ready.status_code == 200
