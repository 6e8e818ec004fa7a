"""Optional OpenTelemetry tracing (QUEUELOG_OTEL=true, `pip install queuelog[otel]`):
strawberry's extension traces each operation through strawberry's pipeline and its
resolvers, SQLAlchemy's instrumentation each statement run through SQLAlchemy. Exporters,
sampling and the service name come from OpenTelemetry's own OTEL_* variables, through
whatever tracer provider the process sets up (`opentelemetry-instrument`, or the SDK's).
Operations the prepared path runs (`queuelog.schema.prepared`) skip strawberry's
extensions, and the writers' hot statements go to the driver directly: neither makes spans.

Nothing here is imported unless tracing is on."""

from __future__ import annotations

from collections.abc import Sequence

import strawberry
from sqlalchemy.engine import Engine
from strawberry.schema.base import BaseSchema


def enable(schema: BaseSchema, engines: Sequence[Engine]) -> None:
    assert isinstance(schema, strawberry.Schema)
    try:
        from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor
        from strawberry.extensions.tracing import OpenTelemetryExtension
    except ImportError as exc:
        raise RuntimeError(
            "QUEUELOG_OTEL=true needs OpenTelemetry: pip install 'queuelog[otel]'"
        ) from exc
    schema.extensions = (*schema.extensions, OpenTelemetryExtension)
    # Its declared range stops below SQLAlchemy 2.1, whose engine events it uses unchanged.
    SQLAlchemyInstrumentor().instrument(engines=list(engines), skip_dep_check=True)
