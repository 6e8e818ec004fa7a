"""A COMMIT that raises: the writes it carried are never applied twice.

A COMMIT can take effect on the server and still raise in the client (the connection drops
before the answer comes back). The writers then ask PostgreSQL how that transaction ended:
committed, every caller gets its result; rolled back, each write runs again alone. SQLite
cannot be asked, so each caller gets the error and nothing runs again.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Any

import psycopg
import pytest

from queuelog.runtime import Services
from queuelog.service.models import Actor, EnqueueRequest
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.tx import Tx
from tests.storage.rows import table_counts
from tests.storage.test_shared_inserts import CALLERS, _enqueues, _while_writers_are_busy


def _fail_one_commit(
    services: Services, monkeypatch: pytest.MonkeyPatch, *, after_committing: bool
) -> None:
    """The first COMMIT of a transaction that inserted jobs raises what a dropped connection
    raises, after committing (`after_committing`) or instead of it."""
    inserted = threading.local()  # per writer thread: its transaction inserted jobs
    failures = []
    insert = jobs_sql.insert

    def inserting(tx: Tx, values: Any) -> Any:
        inserted.jobs = True
        return insert(tx, values)

    dialect = services.db.writer.dialect
    commit = dialect.do_commit
    lost: Exception = (
        psycopg.OperationalError("server closed the connection unexpectedly")
        if services.db.dialect == "postgresql"
        else sqlite3.OperationalError("disk I/O error")
    )

    def flaky_commit(dbapi_connection: Any) -> None:
        ours, inserted.jobs = getattr(inserted, "jobs", False), False
        if not ours or failures:
            return commit(dbapi_connection)
        failures.append(lost)
        if after_committing:
            commit(dbapi_connection)
        raise lost

    monkeypatch.setattr(jobs_sql, "insert", inserting)
    monkeypatch.setattr(dialect, "do_commit", flaky_commit)


async def _enqueue_through_a_failing_commit(
    services: Services, producer: Actor, monkeypatch: pytest.MonkeyPatch, after_committing: bool
) -> tuple[list[Any], tuple[int, int]]:
    """What each of CALLERS enqueues queued together got, and the counts of jobs and events
    added meanwhile."""
    before = table_counts(services.db)
    _fail_one_commit(services, monkeypatch, after_committing=after_committing)
    start = _enqueues(services, producer)
    results = await _while_writers_are_busy(services, lambda: [_outcome(a) for a in start()])
    after = table_counts(services.db)
    for _ in services.db.writer_threads:  # and then the writers carry on
        _, created = await services.service.enqueue(producer, EnqueueRequest("email"))
        assert created
    return results, (after[0] - before[0], after[1] - before[1])


async def _outcome(awaitable: Any) -> Any:
    try:
        return await awaitable
    except Exception as exc:
        return exc


async def test_writes_whose_commit_took_effect_but_raised_are_not_run_again(
    services: Services, producer: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    results, added = await _enqueue_through_a_failing_commit(services, producer, monkeypatch, True)
    assert added == (CALLERS, CALLERS)  # each job once, with its one event: not again
    if services.db.dialect == "postgresql":  # asked, the server says it committed
        assert [job.payload for job, _ in results] == [{"i": i} for i in range(CALLERS)]
        for job, _ in results:
            assert await services.service.get(producer, job.id) == job
    else:  # SQLite cannot tell: every caller hears of the error
        assert all(isinstance(r, sqlite3.OperationalError) for r in results), results


async def test_writes_whose_commit_failed_run_again_only_once_known_rolled_back(
    services: Services, producer: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    results, added = await _enqueue_through_a_failing_commit(services, producer, monkeypatch, False)
    if services.db.dialect == "postgresql":  # rolled back: each ran again, alone, and landed
        assert [job.payload for job, _ in results] == [{"i": i} for i in range(CALLERS)]
        assert added == (CALLERS, CALLERS)
    else:  # not known to have rolled back: not run again, and every caller is told
        assert all(isinstance(r, sqlite3.OperationalError) for r in results), results
        assert added == (0, 0)
