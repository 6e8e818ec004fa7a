"""The conformance suite runs on a fresh SQLite file and on an emptied PostgreSQL database.

One conformance suite for the storage layer, run on SQLite and on PostgreSQL alike, in the
`test_*.py` modules here. Every test drives `queuelog.storage` directly through
`Database.write_sync` / `read_sync`, so that a backend that differs from the other fails here
before it fails in the service. Their shared helpers: `rows.py` (job values, inserts, claims,
counts) and `plans.py` (the statements sent and the plans made of them).
"""

import pytest

# The helpers assert too: pytest rewrites their asserts as it does a test module's.
pytest.register_assert_rewrite("tests.storage.plans", "tests.storage.rows")


@pytest.fixture
def db_url(reused_db_url: str) -> str:
    return reused_db_url
