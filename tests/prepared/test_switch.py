"""The fast path's switch and fence: QUEUELOG_PREPARED_OPERATIONS=false, an installed
strawberry or graphql-core the path was not tested with, or a private name that fails to
import each serve everything through strawberry's generic path, the last two after one
warning."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from queuelog.api import fastpath
from queuelog.api.fastpath.prepared import PreparedOperations
from queuelog.api.schema import QueuelogSchema, build_schema
from queuelog.config import Settings
from queuelog.edge.app import create_app
from queuelog.fences import graphql_core as compat
from queuelog.fences.versions import untested_versions
from queuelog.service.models import Role

VIEWER = "{ viewer { name role } }"


@pytest.fixture(autouse=True)
def fresh_check() -> Iterator[None]:
    """The check runs once a process; each test here runs it anew."""
    fastpath._unavailable.cache_clear()
    yield
    fastpath._unavailable.cache_clear()


def _generic(schema: QueuelogSchema) -> bool:
    return schema.fast_path is None and schema.prepared is None


async def _viewer(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """VIEWER answered over HTTP by an app on `settings`; PreparedOperations.get must not
    be asked."""

    def never(*args: object) -> None:
        raise AssertionError("the prepared path was asked")

    monkeypatch.setattr(PreparedOperations, "get", never)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        _, secret = await app.state.services.keys.create("admin", Role.ADMIN)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            headers = {"Authorization": f"Bearer {secret}"}
            response = await client.post("/graphql", json={"query": VIEWER}, headers=headers)
    body: dict[str, object] = response.json()
    return body


def _settings(tmp_path: Path) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path}/q.db")


def test_the_path_is_on_by_default_with_the_tested_versions() -> None:
    schema = build_schema(Settings())
    assert schema.fast_path is not None and schema.prepared is not None
    assert untested_versions(compat.TESTED) == []


async def test_switched_off_everything_is_served_the_generic_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("QUEUELOG_PREPARED_OPERATIONS", "false")
    settings = _settings(tmp_path)
    assert settings.prepared_operations is False
    assert _generic(build_schema(settings))
    body = await _viewer(settings, monkeypatch)
    assert body == {"data": {"viewer": {"name": "admin", "role": "ADMIN"}}}
    assert not [r for r in caplog.records if r.name == "queuelog.fastpath"]  # asked, not odd


async def test_an_untested_version_warns_once_and_serves_the_generic_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(compat, "TESTED", {**compat.TESTED, "strawberry-graphql": "==0.1.0"})
    caplog.set_level(logging.WARNING, "queuelog.fastpath")
    assert _generic(build_schema(Settings()))
    assert _generic(build_schema(Settings()))
    body = await _viewer(_settings(tmp_path), monkeypatch)
    assert body == {"data": {"viewer": {"name": "admin", "role": "ADMIN"}}}
    warnings = [r for r in caplog.records if r.name == "queuelog.fastpath"]
    assert len(warnings) == 1, warnings
    assert "not tested with strawberry-graphql" in warnings[0].getMessage()


def test_a_private_name_that_fails_to_import_falls_back(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(compat, "FAST_PATH_MISSING", "ImportError: cannot import name 'X'")
    caplog.set_level(logging.WARNING, "queuelog.fastpath")
    assert _generic(build_schema(Settings()))
    (warning,) = [r for r in caplog.records if r.name == "queuelog.fastpath"]
    assert "cannot import name 'X'" in warning.getMessage()


def test_a_fast_path_module_that_fails_to_load_falls_back(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A None entry makes the import raise ImportError, as a moved private name would.
    monkeypatch.setitem(sys.modules, "queuelog.api.fastpath.engine", None)
    caplog.set_level(logging.WARNING, "queuelog.fastpath")
    assert _generic(build_schema(Settings()))
    (warning,) = [r for r in caplog.records if r.name == "queuelog.fastpath"]
    assert "failed to load" in warning.getMessage()
