"""SQLite: the WAL is checkpointed beside the writer, not inside its commits (see
`storage.checkpoint`): in a big table the commit that checkpointed stalled every writer."""

from __future__ import annotations

import struct
import time

import pytest
import sqlalchemy as sa

from queuelog.storage import checkpoint
from queuelog.storage.db import Database
from queuelog.storage.tables import queuelog_meta
from queuelog.storage.tx import Tx

WRITES = 600  # a few pages each: past SQLite's default 1,000-page autocheckpoint


def _put(tx: Tx, name: str) -> None:
    tx.conn.execute(sa.insert(queuelog_meta).values(name=name, value="x" * 3000))


def _autocheckpoint(tx: Tx) -> int:
    return int(tx.conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar_one())


def _log(db: Database) -> tuple[int, int]:
    """(frames in the log, frames of it copied back to the database), read from the
    wal-index (https://www.sqlite.org/walformat.html: mxFrame at byte 16 of its header,
    nBackfill at byte 96), in native byte order: asking SQLite would checkpoint."""
    with open(f"{db.url.database}-shm", "rb") as shm:
        head = shm.read(100)
    return struct.unpack_from("=I", head, 16)[0], struct.unpack_from("=I", head, 96)[0]


@pytest.fixture
def sqlite_db(db: Database) -> Database:
    if db.dialect != "sqlite":
        pytest.skip("SQLite's write-ahead log")
    return db


def test_the_checkpointer_copies_the_log_back_and_the_writer_does_not(
    sqlite_db: Database,
) -> None:
    db = sqlite_db
    # The writer's commits checkpoint only far past the default: a safety net.
    assert db.write_sync(_autocheckpoint) == checkpoint.WRITER_AUTOCHECKPOINT
    for i in range(WRITES):
        db.write_sync(_put, f"checkpoint-{i}")
    frames, copied = _log(db)
    assert 0 < frames < checkpoint.WRITER_AUTOCHECKPOINT
    deadline = time.monotonic() + 10
    while copied < frames and time.monotonic() < deadline:
        time.sleep(checkpoint.CHECKPOINT_EVERY)  # the checkpointer's pace
        frames, copied = _log(db)
    assert copied == frames, (frames, copied)


def test_closing_the_database_stops_the_checkpointer(sqlite_db: Database) -> None:
    assert sqlite_db.checkpointer is not None
    thread = sqlite_db.checkpointer._thread
    sqlite_db.close()
    assert not thread.is_alive()
