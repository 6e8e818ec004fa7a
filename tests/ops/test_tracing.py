"""Tracing is off by default and then imports nothing of OpenTelemetry; on (when the `otel`
extra is installed), operations and SQL statements make spans."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from queuelog.config import Settings
from queuelog.edge.app import create_app
from queuelog.runtime import Services
from queuelog.service.models import Priority, Role

OFF = """
import sys
from queuelog.edge.app import create_app
from queuelog.config import Settings
create_app(Settings(database_url=sys.argv[1]))
tracing = ("opentelemetry", "strawberry.extensions.tracing")
loaded = [m for m in sys.modules if m.startswith(tracing)]
assert not loaded, loaded
"""


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_off_by_default_and_not_imported(db_url: str, tmp_path: Path) -> None:
    assert Settings().otel is False
    done = subprocess.run(
        [sys.executable, "-c", OFF, db_url], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_on_traces_operations_and_statements(settings: Settings, services: Services) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _, secret = await services.keys.create("admin", Role.ADMIN, None, Priority.CRITICAL)
    app = create_app(settings.model_copy(update={"otel": True}), services)
    # a directive: strawberry's own pipeline runs it (where its extension hooks in)
    query = "query Stats { queueStats @include(if: true) { pending } }"
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        response = await client.post(
            "/graphql", json={"query": query}, headers={"Authorization": f"Bearer {secret}"}
        )
    assert "errors" not in response.json(), response.json()
    names = [span.name for span in exporter.get_finished_spans()]
    assert any("GraphQL" in name for name in names), names
    assert any(name.upper().startswith("SELECT") for name in names), names
