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
        if db.dialect == "postgresql":
            # Several replicas may start at once: one migrates, the others wait.
            conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7170001)")
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
