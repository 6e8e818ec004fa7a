"""The writer threads: every queued write is run and answered, whoever queued it and
whenever, and nothing a caller does can stop them."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa

from queuelog.config import Settings
from queuelog.runtime import open_services
from queuelog.storage import driver
from queuelog.storage.db import Database
from queuelog.storage.migrate import migrate
from queuelog.storage.tables import queuelog_meta
from queuelog.storage.tx import Tx


def _put(tx: Tx, name: str, value: int) -> int:
    tx.conn.execute(sa.insert(queuelog_meta).values(name=name, value=value))
    return value


def _count(tx: Tx) -> int:
    return int(tx.conn.execute(sa.select(sa.func.count()).select_from(queuelog_meta)).scalar_one())


def test_write_sync_from_many_threads_at_once(db: Database) -> None:
    before = db.read_sync(_count)
    with ThreadPoolExecutor(8) as pool:
        done = list(pool.map(lambda i: db.write_sync(_put, f"t{i}", i), range(200)))
    assert done == list(range(200))
    assert db.read_sync(_count) == before + 200


async def test_async_and_sync_writers_share_the_writers(db: Database) -> None:
    before = db.read_sync(_count)
    sync = asyncio.gather(*(asyncio.to_thread(db.write_sync, _put, f"s{i}", i) for i in range(50)))
    wrote = await asyncio.gather(*(db.write(_put, f"a{i}", i) for i in range(50)))
    assert wrote == list(range(50))
    assert await sync == list(range(50))
    assert db.read_sync(_count) == before + 100


def test_a_write_whose_event_loop_has_closed_does_not_stop_the_writers(db: Database) -> None:
    """A caller's loop may be gone by the time its write commits (a test, a CLI command
    cancelled): the write is not answered, and the next writes are."""
    release = threading.Event()

    def held(tx: Tx) -> int:
        release.wait(10)
        return _put(tx, "orphan", 1)

    loop = asyncio.new_event_loop()
    task = loop.create_task(db.write(held))
    loop.run_until_complete(asyncio.sleep(0.05))  # queued; the writer waits in `held`
    task.cancel()
    loop.close()
    release.set()
    answered: list[int] = []  # a writer that died would leave the next write unanswered
    caller = threading.Thread(target=lambda: answered.append(db.write_sync(_put, "x", 2)))
    caller.daemon = True
    caller.start()
    caller.join(10)
    assert answered == [2]
    assert all(thread.is_alive() for thread in db.writer_threads)


def test_close_finishes_what_was_queued_and_refuses_what_comes_after(
    settings: Settings,
) -> None:
    services = open_services(settings)
    db = services.db
    migrate(db)
    release = threading.Event()
    results: list[int] = []

    def slow(tx: Tx) -> int:
        release.wait(10)
        return _put(tx, "slow", 1)

    async def main() -> None:
        writes = [asyncio.ensure_future(db.write(slow))]
        writes += [asyncio.ensure_future(db.write(_put, f"q{i}", i)) for i in range(20)]
        await asyncio.sleep(0.05)
        closing = asyncio.ensure_future(asyncio.to_thread(db.close))
        await asyncio.sleep(0.05)
        assert not closing.done()  # waits for the queued writes
        release.set()
        results.extend(await asyncio.gather(*writes))
        await closing

    asyncio.run(main())
    assert results == [1, *range(20)]
    with pytest.raises(RuntimeError, match="closed"):
        db.write_sync(_count)
    reopened = Database(settings.database_url)
    try:
        assert reopened.read_sync(_count) >= 21
    finally:
        reopened.close()


def _meta_rows(tx: Tx, prefix: str) -> list[str]:
    rows = tx.conn.execute(
        sa.select(queuelog_meta.c.name).where(queuelog_meta.c.name.like(f"{prefix}%"))
    )
    return sorted(rows.scalars())


def _driver_then_core(tx: Tx, prefix: str, fail: bool) -> None:
    """A row put through the driver's cursor (as the hot statements are), then one through
    Core (which makes SQLAlchemy begin its own transaction on the same connection)."""
    driver.execute(tx, f"INSERT INTO queuelog_meta (name, value) VALUES ('{prefix}-driver', 1)", [])
    _put(tx, f"{prefix}-core", 2)
    if fail:
        raise RuntimeError("the write fails after both statements")


@pytest.mark.parametrize("core_first", [False, True])
def test_a_transaction_mixing_driver_and_core_statements_commits_or_rolls_back_whole(
    db: Database, core_first: bool
) -> None:
    """The writer begins and commits on the driver's connection unless a Core statement
    made SQLAlchemy begin its own: either way, one transaction, all or nothing."""

    def write(tx: Tx, prefix: str, fail: bool) -> None:
        if core_first:
            _put(tx, f"{prefix}-first", 0)
        _driver_then_core(tx, prefix, fail)

    with pytest.raises(RuntimeError):
        db.write_sync(write, "undone", True)
    assert db.read_sync(_meta_rows, "undone") == []
    db.write_sync(write, "done", False)
    expected = ["done-core", "done-driver", *(["done-first"] if core_first else [])]
    assert db.read_sync(_meta_rows, "done") == expected
    db.write_sync(_put, "after", 3)  # the connection carries on with a fresh transaction
    db.write_sync(lambda tx: tx.driver_cursor().execute("SELECT 1"))
    assert db.read_sync(_meta_rows, "after") == ["after"]
