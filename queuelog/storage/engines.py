"""The engines: plain database URLs in, SQLAlchemy engines for our drivers out.

SQLite connections are set up for WAL and take BEGIN (IMMEDIATE for the writer) from us.
PostgreSQL's pool checks a connection before use only when it may be stale, and its engine
asks the server how a transaction whose COMMIT raised ended.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import sqlalchemy as sa
from psycopg.types.string import TextLoader
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, Engine, make_url

from queuelog.storage.dialect import Dialect
from queuelog.storage.postgresql.dialect import PostgresDialect
from queuelog.storage.sqlite.dialect import JSON_CONTAINS, SQLiteDialect, json_contains_text

# A pooled PostgreSQL connection idle this long is checked before it is used again.
PING_IDLE_SECONDS = 1.0
# How long a writer whose COMMIT raised asks PostgreSQL for that transaction's outcome.
OUTCOME_WAIT_SECONDS = 5.0
_XACT_STATUS = sa.text("SELECT pg_xact_status(CAST(:xid AS xid8))")


def normalize_url(url: str) -> URL:
    """Plain `sqlite:///…` / `postgresql://…` URLs in; the drivers we use picked here."""
    try:
        parsed = make_url(url)
    except sa.exc.ArgumentError:
        raise ValueError(
            "cannot parse the database URL; expected sqlite:///path or postgresql://host/db"
        ) from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.database in (None, "", ":memory:"):
            raise ValueError("queuelog needs a SQLite file, not an in-memory database")
        return parsed.set(drivername="sqlite+pysqlite")
    if backend in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+psycopg")
    raise ValueError(f"unsupported database URL scheme {parsed.drivername!r}")


def sqlite_engine(
    url: URL,
    size: int,
    *,
    immediate: bool,
    synchronous: str,
    busy_timeout_ms: int,
    autocheckpoint: int | None = None,
) -> Engine:
    engine = sa.create_engine(
        url,
        pool_size=size,
        max_overflow=0,
        connect_args={"check_same_thread": False, "timeout": busy_timeout_ms / 1000},
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA synchronous={synchronous}")
        dbapi_conn.create_function(JSON_CONTAINS, 2, json_contains_text, deterministic=True)
        if autocheckpoint is not None:  # see `storage.checkpoint`
            cur.execute(f"PRAGMA wal_autocheckpoint={int(autocheckpoint)}")
        cur.close()

    begin = "BEGIN IMMEDIATE" if immediate else "BEGIN"

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # On the driver's connection: SQLAlchemy's full execution path for a bare
        # BEGIN cost a noticeable share of every transaction. The writer may have begun
        # one on the driver already (`Database._transaction`): it carries on in that one.
        driver_conn: Any = conn.connection.driver_connection
        if not driver_conn.in_transaction:
            driver_conn.execute(begin)

    return engine


def _jsonb_as_text(dbapi_conn: Any, _record: Any) -> None:
    """Read jsonb (payloads) as its text, as SQLite's payloads are read: the service parses
    it once, and a job passed on unread is never parsed."""
    dbapi_conn.adapters.register_loader("jsonb", TextLoader)


class PostgresEngine:
    """A PostgreSQL engine whose pool checks a connection before use only if it sat idle
    for PING_IDLE_SECONDS, or was pooled when a connection was found dead (`lost`).
    (pool_pre_ping checks at every checkout: a round trip per transaction.) A connection
    that dies while in use fails its statement: the caller runs it again (`Database`) on a
    checked one.

    `custom_plans`: PostgreSQL plans every statement for its parameters and the tables'
    size at the time. (psycopg prepares a statement it runs often, and PostgreSQL may then
    keep one generic plan of it, made from the table's size then: the feed's read of the
    events after a cursor, planned while job_events was small, is a scan and sort of the
    whole table, kept as it grows.)"""

    def __init__(self, url: URL, pool_size: int, *, custom_plans: bool = False) -> None:
        connect_args = {}
        if custom_plans:  # added to the URL's own options, if it has any
            given = url.query.get("options", "")
            options = given if isinstance(given, str) else " ".join(given)
            connect_args["options"] = f"{options} -c plan_cache_mode=force_custom_plan".strip()
        self.engine = sa.create_engine(
            url, pool_size=pool_size, max_overflow=0, connect_args=connect_args
        )
        self._lock = threading.Lock()  # `lost_at` is set by writers, read by every thread
        self.lost_at = 0.0
        event.listen(self.engine, "connect", _jsonb_as_text)
        event.listen(self.engine, "checkin", self._on_checkin)
        event.listen(self.engine, "checkout", self._on_checkout)

    def lost(self) -> None:
        """A connection was found dead: check every one pooled before now."""
        with self._lock:
            self.lost_at = time.monotonic()

    @staticmethod
    def _on_checkin(_dbapi_conn: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    def fresh(self, since: float) -> bool:
        """Whether a connection last used at `since` may be used without a check."""
        with self._lock:
            lost_at = self.lost_at
        return time.monotonic() - since < PING_IDLE_SECONDS and since > lost_at

    def ping(self, dbapi_conn: Any) -> None:
        """Check a connection: DisconnectionError if it is dead."""
        try:
            self.engine.dialect.do_ping(dbapi_conn)
        except Exception as exc:
            raise sa.exc.DisconnectionError() from exc

    def _on_checkout(self, dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("idle_since")
        if since is not None and not self.fresh(since):  # not new, and maybe stale
            self.ping(dbapi_conn)  # if it raises, the pool connects afresh

    def transaction_status(self, xid: str) -> str | None:
        """PostgreSQL's word on transaction `xid`: "committed" or "aborted"; None when it
        cannot be told (the server out of reach or still committing)."""
        deadline = time.monotonic() + OUTCOME_WAIT_SECONDS
        while True:
            with contextlib.suppress(sa.exc.DBAPIError), self.engine.connect() as conn:
                status = conn.execute(_XACT_STATUS, {"xid": xid}).scalar()
                if status in ("committed", "aborted"):
                    return str(status)
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)


def for_backend(backend: str) -> Dialect:
    """The dialect of a database URL's backend name."""
    if backend == "sqlite":
        return SQLiteDialect()
    return PostgresDialect()
