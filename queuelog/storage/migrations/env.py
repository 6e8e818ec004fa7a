"""Alembic environment: queuelog always passes its own connection in `config.attributes`."""

from __future__ import annotations

from alembic import context

from queuelog.storage.tables import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
