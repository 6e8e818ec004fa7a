"""The writer threads: every queued write is run and answered, whoever queued it and
whenever, and nothing a caller does can stop them."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa

from queuelog.config import Settings
from queuelog.services import open_services
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
