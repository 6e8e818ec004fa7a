"""SQLite's WAL checkpoints, run beside the writer instead of inside its commits.

SQLite copies the write-ahead log back into the database file (a checkpoint) in the commit
that takes the log past `wal_autocheckpoint` pages, 1,000 by default: that commit then
writes those pages where they belong and syncs the file. In a large table the pages a
thousand claims touch lie all over the file, and that commit takes many times a claim,
every write queued behind it waiting. So the writer's connection checkpoints only once the
log is far longer (WRITER_AUTOCHECKPOINT, the safety net should this thread fall behind),
and this thread, on
a connection of its own, runs PASSIVE checkpoints (they wait for no reader and no writer)
every CHECKPOINT_EVERY seconds while there are commits. Under a steady stream of commits
the log is never all copied back at the moment a transaction begins, which is when SQLite
starts it over; the writer's own checkpoint then finds nearly every page copied already,
and the log file may reach WRITER_AUTOCHECKPOINT pages before it is reused.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

log = logging.getLogger("queuelog.storage")

CHECKPOINT_EVERY = 0.1  # seconds between checkpoints while there are commits
WRITER_AUTOCHECKPOINT = 10_000  # pages (~40 MB of log) before a commit checkpoints itself


class Checkpointer:
    def __init__(self, path: str, synchronous: str) -> None:
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        # In WAL mode from the start (as every connection of ours), or it would see none.
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(f"PRAGMA synchronous={synchronous}")  # as the writer syncs
        self._committed = threading.Event()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="queuelog-checkpoint", daemon=True)
        self._thread.start()

    def committed(self) -> None:
        """A transaction committed (called by the writer): its pages want checkpointing."""
        if not self._committed.is_set():  # set() takes a lock and notifies, every commit
            self._committed.set()

    def _run(self) -> None:
        while True:
            self._committed.wait()
            if self._closing.is_set():
                return
            self._committed.clear()
            try:
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            except sqlite3.Error:  # the writer checkpoints itself past its limit meanwhile
                log.warning("WAL checkpoint failed", exc_info=True)
            if self._closing.wait(CHECKPOINT_EVERY):
                return

    def close(self) -> None:
        self._closing.set()
        self._committed.set()
        self._thread.join()
        self._conn.close()
