"""Migration 0011 under a database that holds jobs already, on both backends: every payload
reads back as the same JSON and containment finds it (on PostgreSQL through the new GIN
index); a payload stored with a NUL escape, which jsonb cannot hold, keeps the rest of its
text with U+FFFD in the NUL's place."""

from __future__ import annotations

from pathlib import Path

import orjson
import sqlalchemy as sa

from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database
from queuelog.storage.filters import JobFilter
from queuelog.storage.migrate import migrate
from queuelog.storage.scope import EVERYTHING
from tests.templates import fresh_database

_INSERT = (
    "INSERT INTO jobs (type, payload, priority, status, retry_count, max_retries, producer,"
    " run_at, created_at, updated_at) VALUES ('email', :payload, 0, 'pending', 0, 3, 'p',"
    " :now, :now, :now)"
)
STORED = [
    '{"b":1,"a":{"x":[1,2]}}',
    '{"text":"\\\\u0000 is no NUL","n":null}',
    '{"nul":"a\\u0000b\\u0000","k\\u0000":true}',
]


def test_payloads_stored_before_0011_read_back_the_same(backend: str, tmp_path: Path) -> None:
    with fresh_database(backend, tmp_path, migrated=False) as url:
        db = Database(url)
        try:
            migrate(db, "0010")
            now = "2026-12-01 10:00:00" if backend == "sqlite" else "2026-12-01T10:00:00Z"
            with db.writer.begin() as conn:
                for text in STORED:
                    conn.execute(sa.text(_INSERT), {"payload": text, "now": now})
            migrate(db)

            def read(wanted: str | None) -> list[object]:
                rows, _, _ = db.read_sync(
                    jobs_sql.page,
                    scope=EVERYTHING,
                    status=None,
                    job_type=None,
                    first=10,
                    before_id=None,
                    count=False,
                    match=JobFilter(payload_contains=wanted),
                )
                return [orjson.loads(r.payload) for r in reversed(rows)]

            expected = [orjson.loads(t) for t in STORED]
            if backend == "postgresql":
                expected[2] = {"nul": "a\ufffdb\ufffd", "k\ufffd": True}
            assert read(None) == expected
            assert read('{"a": {"x": [2]}}') == [expected[0]]
            assert read('{"text": "\\\\u0000 is no NUL"}') == [expected[1]]
            if backend == "postgresql":
                with db.reader.connect() as conn:
                    kind = conn.exec_driver_sql(
                        "SELECT data_type FROM information_schema.columns"
                        " WHERE table_name = 'jobs' AND column_name = 'payload'"
                    ).scalar_one()
                assert kind == "jsonb"
        finally:
            db.close()
