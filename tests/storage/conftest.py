"""The conformance suite runs on a fresh SQLite file and on an emptied PostgreSQL database."""

from tests.reused_db import db_url, session_pg_url  # noqa: F401  (fixtures)
