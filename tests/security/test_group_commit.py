"""One caller's failing write costs only itself: the writes queued with it in one group
commit run once and commit, whatever it does (on both backends).

A write fails in one of two ways: a rule refuses it (it raises after doing part of its work),
or the database does (a constraint, which leaves a PostgreSQL transaction unusable until it
is rolled back). Either way it is undone alone, to a savepoint of its own; a write the
database refused runs once more alone, as it would have had it come alone."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import sqlalchemy as sa

from queuelog.domain.lifecycle import CANCEL
from queuelog.runtime import Services
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database
from queuelog.storage.tables import queuelog_meta
from queuelog.storage.tx import Tx
from tests.security.http import send
from tests.storage.rows import T0, events_of, insert, job, table_counts
from tests.support import ADMIN_SECRET, LiveServer

M = queuelog_meta.c


class Refused(Exception):
    """A rule of the write refused it."""


def _meta(db: Database) -> dict[str, int]:
    rows = db.read_sync(lambda tx: tx.conn.execute(sa.select(M.name, M.value)).all())
    return {str(name): int(value) for name, value in rows}


async def _one_batch(db: Database, writes: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Queue `writes` as one group: every writer thread is held busy while they queue, then
    let go (the first writer free drains them all). Their results, errors included."""
    release, started = threading.Event(), threading.Semaphore(0)

    def held(tx: Tx) -> None:
        started.release()
        release.wait(30)

    holds = []
    for _ in db.writer_threads:  # one at a time: each writer takes the hold queued last
        holds.append(asyncio.ensure_future(db.write(held)))
        assert await asyncio.to_thread(started.acquire, True, 30)
    queued = [asyncio.ensure_future(write()) for write in writes]
    await asyncio.sleep(0.05)  # every write is queued behind the holds
    release.set()
    await asyncio.gather(*holds)
    return await asyncio.gather(*queued, return_exceptions=True)


async def test_a_failing_write_is_undone_alone_and_the_others_commit_once(
    services: Services,
) -> None:
    db = services.db
    (job_id,) = insert(db, job())
    meta, counts, events = _meta(db), table_counts(db), events_of(db, job_id)
    ran: Counter[str] = Counter()

    def put(name: str) -> Callable[[Tx], str]:
        def write(tx: Tx) -> str:
            ran[name] += 1
            tx.conn.execute(sa.insert(queuelog_meta).values(name=name, value=1))
            return name

        return write

    def refused_after_writing(tx: Tx) -> None:
        ran["refused"] += 1
        tx.conn.execute(sa.insert(queuelog_meta).values(name="refused", value=1))
        cancelled = {"finished_at": T0, "updated_at": T0}
        assert jobs_sql.apply(tx, CANCEL, job_id, cancelled) is not None  # and its event
        raise Refused("no")

    def refused_by_the_database(tx: Tx) -> None:
        ran["duplicate"] += 1
        tx.conn.execute(sa.insert(queuelog_meta).values(name="duplicate-of-a", value=2))
        tx.conn.execute(sa.insert(queuelog_meta).values(name="a", value=2))  # taken by `a`

    writes = [put("a"), refused_after_writing, put("b"), refused_by_the_database, put("c")]
    a, refused, b, duplicate, c = await _one_batch(db, [partial(db.write, w) for w in writes])

    assert (a, b, c) == ("a", "b", "c")
    assert isinstance(refused, Refused)
    assert isinstance(duplicate, sa.exc.IntegrityError)
    # The others ran once each (nothing ran them again alone); the write the database
    # refused had a second run alone, as a lone write that failed would.
    assert ran == {"a": 1, "b": 1, "c": 1, "refused": 1, "duplicate": 2}
    # What the failing writes did is undone: their rows, the job's change and its event.
    assert _meta(db) == {**meta, "a": 1, "b": 1, "c": 1}
    assert db.read_sync(jobs_sql.get, job_id).status == "pending"
    assert events_of(db, job_id) == events
    assert table_counts(db) == counts


async def test_rows_of_one_failing_writer_do_not_fail_the_shared_insert(
    services: Services,
) -> None:
    """Concurrent `write_rows` of one function share one statement; when it raises, each
    writer's rows run apart, so only the writer whose rows are at fault gets the error."""
    db = services.db
    calls: Counter[int] = Counter()

    def put_rows(tx: Tx, rows: list[tuple[str, int]]) -> list[str]:
        calls[len(rows)] += 1
        for name, value in rows:
            tx.conn.execute(sa.insert(queuelog_meta).values(name=name, value=value))
        return [name for name, _ in rows]

    meta = _meta(db)
    db.write_sync(put_rows, [("taken", 0)])
    first, second, third = await _one_batch(
        db,
        [
            partial(db.write_rows, put_rows, [("r1", 1), ("r2", 2)]),
            partial(db.write_rows, put_rows, [("r3", 3), ("taken", 4)]),
            partial(db.write_rows, put_rows, [("r5", 5)]),
        ],
    )
    assert first == ["r1", "r2"] and third == ["r5"]
    assert isinstance(second, sa.exc.IntegrityError)
    assert _meta(db) == {**meta, "taken": 0, "r1": 1, "r2": 2, "r5": 5}
    # The shared call (5 rows), then each writer's own rows apart under its savepoint;
    # the refused writer's rows once more alone.
    assert calls == {1: 2, 5: 1, 2: 3}


def test_failing_completions_cost_bystanders_nothing(server: LiveServer, job_type: str) -> None:
    """Through the server: a worker's completions of a job it does not hold, sent alongside
    a producer's enqueues, are refused while every enqueue is stored once."""
    producer = server.create_key("PRODUCER", [job_type])
    worker = server.create_key("WORKER", [job_type])
    enqueue = "mutation($t: String!) { enqueueJob(input: {type: $t}) { job { id } } }"
    complete = "mutation($id: ID!) { completeJob(id: $id) { userErrors { code } } }"
    first = server.gql(enqueue, {"t": job_type}, producer)["enqueueJob"]["job"]["id"]

    def enqueue_one(_: int) -> str:
        return str(server.gql(enqueue, {"t": job_type}, producer)["enqueueJob"]["job"]["id"])

    def fail_one(_: int) -> tuple[str, ...]:
        body = send(server, complete, {"id": first}, worker).json()
        return tuple(e["code"] for e in body["data"]["completeJob"]["userErrors"])

    with ThreadPoolExecutor(8) as pool:
        refused = pool.map(fail_one, range(120))
        made = [first, *pool.map(enqueue_one, range(120))]
        assert set(refused) == {("NOT_FOUND",)}
    stats = server.gql(
        "query($t: String) { queueStats(type: $t) { pending } }", {"t": job_type}, ADMIN_SECRET
    )
    assert len(set(made)) == len(made) == stats["queueStats"]["pending"]
