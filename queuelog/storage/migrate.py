"""Create or upgrade the schema with Alembic, on the database's own writer connection."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from queuelog.storage.db import Database
from queuelog.storage.tx import Tx

SCRIPTS = Path(__file__).with_name("migrations")


def migrate(db: Database, revision: str = "head") -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPTS))
    with db.writer.begin() as conn:
        db.sql.lock_migrations(conn)  # replicas starting at once: one migrates, others wait
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def head_revision() -> str | None:
    """The newest migration this code has."""
    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPTS))
    head: str | None = ScriptDirectory.from_config(cfg).get_current_head()
    return head


def database_revision(tx: Tx) -> str | None:
    """The migration the database is at (None before the first)."""
    revision: str | None = MigrationContext.configure(tx.conn).get_current_revision()
    return revision
