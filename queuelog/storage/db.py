"""The one way to run a transaction: a whole unit of sync Core work in a thread.

An async engine hops between threads for every statement; running the whole transaction
as one synchronous function in a worker thread hops once. On SQLite every
write goes through a single connection on a single thread (one writer never fights itself
for the lock); reads use a small pool of WAL readers. On PostgreSQL a primary writer thread
and a helper that steps in behind long transactions (PG_WRITERS) keep a connection each,
and readers have a pool of their own, whose queries are planned each time they run.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Concatenate, ParamSpec, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from queuelog.storage import batches, deadline, driver
from queuelog.storage.batches import (
    Call,
    CommitFailed,
    ConnectionLost,
    Outcome,
    Queued,
    Rows,
    Settled,
    run_calls,
    settle,
)
from queuelog.storage.checkpoint import WRITER_AUTOCHECKPOINT, Checkpointer
from queuelog.storage.dialect import KEYS_CHANNEL as KEYS_CHANNEL  # where callers look
from queuelog.storage.dialect import TYPES_CHANNEL as TYPES_CHANNEL
from queuelog.storage.engines import PostgresEngine, for_backend, normalize_url, sqlite_engine
from queuelog.storage.retry import retrying
from queuelog.storage.tx import Tx

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")

GROUP_COMMIT_MAX = 64  # writes that may share one transaction
# PostgreSQL writer threads: a primary that drains every queued write, and helpers that
# take a batch of their own only once the primary's transaction has run HELPER_AFTER
# seconds. Writes that queue up meanwhile share the primary's next transaction, their
# inserts one statement: fewer, bigger transactions cost less CPU per write here and in
# PostgreSQL. A long transaction (hundreds of rows, or one waiting on a row lock) does not
# hold up the writes queued behind it: a helper runs them alongside.
PG_WRITERS = 2
HELPER_AFTER = 0.004


class Database:
    def __init__(
        self,
        url: str,
        *,
        sqlite_synchronous: str = "FULL",
        busy_timeout_ms: int = 5_000,
        pool_size: int = 8,
    ) -> None:
        self.url = normalize_url(url)
        # What differs between the backends, chosen here once; `dialect` is its name.
        self.sql = for_backend(self.url.get_backend_name())
        self.dialect = self.sql.name
        self._commit_listeners: list[Callable[[], None]] = []
        self._queue: collections.deque[Queued] = collections.deque()
        self._held = threading.local()  # each writer's connection: see `_connection`
        self.checkpointer: Checkpointer | None = None  # SQLite's, off the writer's path
        self.postgres: PostgresEngine | None = None  # the writers' (PostgreSQL)
        self.postgres_readers: PostgresEngine | None = None
        if self.dialect == "sqlite":
            # The writer thread keeps one connection; the other serves migrations.
            engine = functools.partial(
                sqlite_engine, synchronous=sqlite_synchronous, busy_timeout_ms=busy_timeout_ms
            )
            self.writer = engine(self.url, 2, immediate=True, autocheckpoint=WRITER_AUTOCHECKPOINT)
            self.reader = engine(self.url, pool_size, immediate=False)
            self.checkpointer = Checkpointer(str(self.url.database), sqlite_synchronous)
            writers = 1
        else:
            # The writers' few statements keep plans that hold at any size (tests check
            # them); the readers' lists and filters are planned for each query.
            self.postgres = PostgresEngine(self.url, PG_WRITERS + 2)  # + outcome checks
            self.postgres_readers = PostgresEngine(self.url, pool_size, custom_plans=True)
            self.writer, self.reader = self.postgres.engine, self.postgres_readers.engine
            writers = PG_WRITERS
        self._read_pool = ThreadPoolExecutor(pool_size, thread_name_prefix="queuelog-reader")
        # Writer threads sleep on a queue of wake-ups, which a write adds to only while none
        # is pending (a wake-up per write would mostly find the queue drained).
        self._wakeups: queue.SimpleQueue[None] = queue.SimpleQueue()
        # The helpers' own wake-ups: a write queued while the primary is in a transaction.
        self._helper_wakeups: queue.SimpleQueue[None] = queue.SimpleQueue()
        # The queue's state shared by the event loops that submit and the writer threads,
        # read and changed only under `_lock`.
        self._lock = threading.Lock()
        self._wakeup_pending = False
        self._helper_pending = False
        self._busy_since: float | None = None  # when the primary's transaction started
        self._helpers = writers - 1
        self._closed = threading.Event()  # set by close(): a helper waiting returns
        self.writer_threads = [
            threading.Thread(
                target=self._writer,
                args=(self._helper_loop if i else self._write_loop,),
                name=f"queuelog-writer_{i}",
                daemon=True,
            )
            for i in range(writers)
        ]
        for thread in self.writer_threads:
            thread.start()

    def on_commit(self, listener: Callable[[], None]) -> None:
        """Call `listener` (in the writer thread) after every commit that appended events."""
        self._commit_listeners.append(listener)

    # -- running work -------------------------------------------------------------------

    def write_sync(self, fn: Callable[Concatenate[Tx, P], T], *a: P.args, **k: P.kwargs) -> T:
        """`write` for synchronous callers (never from a writer thread)."""
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._submit((lambda tx: fn(tx, *a, **k), done, None))
        return done.result()

    def read_sync(self, fn: Callable[Concatenate[Tx, P], T], *a: P.args, **k: P.kwargs) -> T:
        return self._read(deadline.current(), fn, *a, **k)

    def _read(
        self,
        until: float | None,
        fn: Callable[Concatenate[Tx, P], T],
        /,
        *a: P.args,
        **k: P.kwargs,
    ) -> T:
        """A read transaction, its statements held to `until` (`storage.deadline`)."""

        def read(retry: bool) -> T:
            with self.reader.begin() as conn:
                tx = Tx(conn, self.sql)
                with batches.marking_lost(tx, retry), self.sql.deadline(conn, until):
                    return fn(tx, *a, **k)

        return retrying(lambda: self._once_more_if_lost(read))

    def _once_more_if_lost(self, run: Callable[[bool], T]) -> T:
        """`run(True)`; if its connection was dead (a server restart, an idle timeout)
        before any COMMIT, nothing took effect: `run(False)` on a checked connection."""
        try:
            return run(True)
        except ConnectionLost:
            self._connection_lost()
            return run(False)

    async def write(self, fn: Callable[Concatenate[Tx, P], T], *a: P.args, **k: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        # Group commit: a writer thread runs every write queued meanwhile in one
        # transaction, so concurrent writers share one commit (one fsync) and one thread
        # hop. SQLite has one writer thread;
        # PostgreSQL a primary and its helpers (PG_WRITERS).
        future: asyncio.Future[T] = loop.create_future()
        self._submit((lambda tx: fn(tx, *a, **k), future, loop))
        return await future

    async def write_rows(self, fn: Callable[[Tx, list[R]], list[T]], rows: list[R]) -> list[T]:
        """`write(fn, rows)` for a write that takes rows and returns one result per row, in
        order: writes of the same `fn` queued together run as one call over all their rows
        (concurrent enqueues become one INSERT), and each gets its own rows' results back.
        If that call raises, each write's rows run again apart (`batches.run_calls`)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[T]] = loop.create_future()
        self._submit((Rows(fn, rows), future, loop))
        return await future

    def _submit(self, queued: Queued) -> None:
        if self._closed.is_set():
            raise RuntimeError("the database is closed")
        with self._lock:
            self._queue.append(queued)
            # A writer clears the flag before it drains: while it is still set, a writer
            # has yet to look at the queue and will see this write.
            wake = not self._wakeup_pending
            self._wakeup_pending = True
            helper = self._busy_since is not None and not self._helper_pending and self._helpers
            if helper:
                self._helper_pending = True
        if wake:
            self._wakeups.put(None)
        if helper:
            self._helper_wakeups.put(None)

    def _writer(self, loop: Callable[[], None]) -> None:
        """A writer thread: `loop` until closed, then give back its kept connection."""
        try:
            loop()
        finally:
            self._release()

    def _write_loop(self) -> None:
        """The primary writer: every queued write is its to run."""
        while True:
            self._wakeups.get()
            if self._closed.is_set() and not self._queue:
                return
            with self._lock:
                self._wakeup_pending = False
            while self._queue:
                with self._lock:
                    self._busy_since = time.monotonic()
                try:
                    self._drain()
                finally:
                    with self._lock:
                        self._busy_since = None

    def _helper_loop(self) -> None:
        """A helper writer: runs queued writes only while the primary's transaction has
        been running for HELPER_AFTER or longer (else the primary takes them next)."""
        while True:
            self._helper_wakeups.get()
            if self._closed.is_set():
                return
            with self._lock:
                self._helper_pending = False
            while self._queue:
                with self._lock:
                    since = self._busy_since
                if since is None:
                    break  # the primary is between transactions: it takes the queue
                wait = since + HELPER_AFTER - time.monotonic()
                if wait > 0:
                    if self._closed.wait(wait):
                        return
                else:
                    self._drain()

    def _drain(self) -> None:
        """Run the queued writes (in a writer thread). All commit together; one that raises
        is undone alone (`batches.run_calls`), and if the database refused it, it runs
        once more alone, as it would have had it come alone. If the batch as a whole fails,
        each runs again alone, so one write's failure never undoes another's."""
        batch: list[Queued] = []
        queued = self._queue
        with self._lock:
            while queued and len(batch) < GROUP_COMMIT_MAX:
                batch.append(queued.popleft())
        if not batch:
            return
        calls = [call for call, _, _ in batch]
        outcomes: list[Outcome]
        try:
            outcomes = self._run_together(calls)
            if len(batch) > 1:
                outcomes = [
                    self._run_alone(c) if not ok and batches.database_error(v) else (ok, v)
                    for c, (ok, v) in zip(calls, outcomes, strict=True)
                ]
        except CommitFailed as failed:
            outcomes = self._after_failed_commit(failed, calls)
        except Exception as exc:
            outcomes = [(False, exc)] if len(batch) == 1 else [self._run_alone(c) for c in calls]
        by_loop: dict[asyncio.AbstractEventLoop | None, list[Settled]] = {}
        for (_, future, loop), (ok, value) in zip(batch, outcomes, strict=True):
            by_loop.setdefault(loop, []).append((future, ok, value))
        for loop, settled in by_loop.items():
            if loop is None:  # write_sync's
                settle(settled)
            else:
                with contextlib.suppress(RuntimeError):  # that loop has closed meanwhile
                    loop.call_soon_threadsafe(settle, settled)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Connection]:
        """A transaction on the calling writer's connection, begun and committed on the
        driver's connection, without SQLAlchemy's own begin and commit around it (the hot
        statements go to the driver too, `storage.driver`). A Core
        statement in it makes SQLAlchemy begin its transaction on the same one (SQLite's
        begin listener sees one open and issues no second BEGIN; psycopg's BEGIN is
        implicit); SQLAlchemy then commits it. If it raises, the connection goes back to
        the pool, which rolls it back or drops it: left open, every later BEGIN on that
        connection would fail (one that is gone, it drops without trying)."""
        conn = self._connection()
        try:
            driver_conn: Any = conn.connection.driver_connection
            self.sql.begin_write(driver_conn)
            yield conn
            if conn.in_transaction():
                conn.commit()
            else:  # as SQLAlchemy commits (through its dialect), without its wrapping
                self.writer.dialect.do_commit(driver_conn)
        except BaseException:
            batches.invalidate_if_lost(conn, self.sql)
            self._release()
            raise
        self._held.used = time.monotonic()

    def _connection(self) -> Connection:
        """The calling writer's connection, kept from one transaction to the next (a pool
        checkout and return per transaction is a large share of a one-job transaction's
        CPU). A PostgreSQL one is checked first when the pool
        would check it: idle for PING_IDLE_SECONDS, or kept while one was found dead."""
        held = self._held
        conn: Connection | None = getattr(held, "conn", None)
        if conn is not None and not conn.invalidated:
            if self.postgres is None or self.postgres.fresh(held.used):
                return conn
            with contextlib.suppress(sa.exc.DisconnectionError):
                self.postgres.ping(conn.connection.dbapi_connection)
                return conn
            conn.invalidate()
        self._release()
        held.conn = conn = self.writer.connect()
        return conn

    def _release(self) -> None:
        """Give the calling writer's connection back to the pool."""
        conn: Connection | None = getattr(self._held, "conn", None)
        self._held.conn = None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _run_together(self, calls: list[Call]) -> list[Outcome]:
        """Every write transaction runs here; one ended for a conflict runs again (`retry`)."""
        return retrying(lambda: self._once_more_if_lost(functools.partial(self._run_once, calls)))

    def _run_once(self, calls: list[Call], retry: bool) -> list[Outcome]:
        committing = False
        try:
            with self._transaction() as conn:
                tx = Tx(conn, self.sql)
                with batches.marking_lost(tx, retry):
                    outcomes = run_calls(tx, calls)
                    if tx.events or tx.deltas:
                        self._append_events(tx)
                committing = True
        except Exception as exc:
            if committing:
                raise CommitFailed(exc, outcomes, tx) from exc
            raise
        if self.checkpointer is not None:
            self.checkpointer.committed()
        if tx.has_events:
            self._notify_commit()
        return outcomes

    def _connection_lost(self) -> None:
        for engine in (self.postgres, self.postgres_readers):
            if engine is not None:
                engine.lost()

    def _notify_commit(self) -> None:
        for listener in self._commit_listeners:
            listener()

    def _after_failed_commit(self, failed: CommitFailed, calls: list[Call]) -> list[Outcome]:
        """The outcomes of writes whose COMMIT raised. A COMMIT can take effect and still
        raise (the connection dropped before its answer came back): running the writes
        again would then apply them twice. So they run again only if their transaction
        is known to have rolled back; if it committed, they have their results; if nobody
        can tell, each gets the error."""
        self._connection_lost()  # most often the cause: check pooled connections first
        xid, postgres = failed.tx.xid, self.postgres  # SQLite cannot be asked
        status = None if xid is None or postgres is None else postgres.transaction_status(xid)
        if status == "committed":
            if failed.tx.has_events:
                self._notify_commit()
            return failed.outcomes
        if status == "aborted" and len(calls) > 1:
            return [self._run_alone(c) for c in calls]
        return [(False, failed.error)] * len(calls)

    def _run_alone(self, call: Call) -> Outcome:
        try:
            return self._run_together([call])[0]
        except CommitFailed as failed:
            return self._after_failed_commit(failed, [call])[0]
        except Exception as exc:
            return False, exc

    async def read(self, fn: Callable[Concatenate[Tx, P], T], *a: P.args, **k: P.kwargs) -> T:
        # The request's deadline, read here: the reader thread does not see this context.
        call = functools.partial(self._read, deadline.current(), fn, *a, **k)
        return await asyncio.get_running_loop().run_in_executor(self._read_pool, call)

    def _append_events(self, tx: Tx) -> None:
        tx.xid = driver.insert_events(tx, tx.events)

    def close(self) -> None:
        """Finish every queued write, then close the connections."""
        self._closed.set()
        self._wakeups.put(None)  # a writer that is told to close returns
        for _ in range(self._helpers):
            self._helper_wakeups.put(None)
        for thread in self.writer_threads:
            thread.join()
        while self._queue:  # queued as the writers were leaving
            self._drain()
        self._release()
        if self.checkpointer is not None:
            self.checkpointer.close()
        self._read_pool.shutdown(wait=True)
        self.writer.dispose()
        self.reader.dispose()
