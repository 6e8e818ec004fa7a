"""Create or upgrade the schema with Alembic, on the database's own writer connection."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from queuelog.storage.db import Database

SCRIPTS = Path(__file__).with_name("migrations")


def migrate(db: Database, revision: str = "head") -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPTS))
    with db.writer.begin() as conn:
        db.sql.lock_migrations(conn)  # replicas starting at once: one migrates, others wait
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
