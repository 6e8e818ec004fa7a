"""A replay from an old cursor reads only the caller's own events: the statement the feed
sends for a producer's or a worker's scope is planned on an index of that scope, never as a
walk of every later event (on both backends, with and without fresh statistics). A key with
no events of its own, replaying from cursor 0 past many events of others, reads nothing.

Checked on the plan rather than by timing: the stall it caused is in the report."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa

from queuelog.events import feed
from queuelog.runtime import Services
from queuelog.service.models import Actor, Role, Status
from queuelog.storage.db import Database
from tests.security.conftest import start
from tests.storage.rows import insert, job
from tests.subscriptions.wsclient import enqueue as ws_enqueue
from tests.subscriptions.wsclient import ws
from tests.support import BACKENDS, LiveServer

OTHERS = 30_000  # events of another producer and worker: enough for PostgreSQL to weigh
OWN = 20  # events of the "small" keys' own, none of which their filters match
PRODUCER = Role.PRODUCER
WORKER = Role.WORKER
COMPLETED = frozenset({Status.COMPLETED})
# Who replays, and with which filters: the index each must be read by.
SCOPES = {
    "ix_job_events_producer": [
        feed.Interest(Actor("quiet-producer", PRODUCER)),
        feed.Interest(Actor("quiet-producer", PRODUCER), job_type="email"),
        feed.Interest(Actor("quiet-producer", PRODUCER), statuses=COMPLETED),
        feed.Interest(Actor("small-producer", PRODUCER)),
        feed.Interest(Actor("small-producer", PRODUCER), job_type="pdf"),
        feed.Interest(Actor("small-producer", PRODUCER), statuses=COMPLETED),
    ],
    "ix_job_events_worker": [
        feed.Interest(Actor("quiet-worker", WORKER)),
        feed.Interest(Actor("quiet-worker", WORKER), job_type="email"),
        feed.Interest(Actor("small-worker", WORKER), job_type="pdf"),
        feed.Interest(Actor("small-worker", WORKER), statuses=COMPLETED),
    ],
}


def _fill(db: Database) -> None:
    """OTHERS events of another producer's job, half of them with its worker; then OWN
    events of the small producer's job, held by the small worker."""
    numbers = (
        "SELECT generate_series(1, :n) AS i"
        if db.dialect == "postgresql"
        else "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < :n)"
        " SELECT i FROM s"
    )
    statement = sa.text(
        "INSERT INTO job_events"
        " (job_id, job_type, producer, worker_id, previous_status, status, occurred_at)"
        " SELECT :job, 'email', :producer, CASE WHEN i % 2 = 0 THEN :worker END,"
        " 'pending', 'running', :at"
        f" FROM ({numbers}) AS numbers"
    )
    at = job()["created_at"]
    for producer, worker, n in (
        ("other-producer", "other-worker", OTHERS),
        ("small-producer", "small-worker", OWN),
    ):
        (job_id,) = insert(db, job(producer=producer))
        values = {"n": n, "job": job_id, "at": at, "producer": producer, "worker": worker}
        db.write_sync(lambda tx, v=values: tx.conn.execute(statement, v))


@contextmanager
def _captured(db: Database) -> Iterator[list[tuple[str, Any]]]:
    """The statements the reader engine sends meanwhile, with their parameters."""
    sent: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        sent.append((statement, params))

    sa.event.listen(db.reader, "before_cursor_execute", capture)
    try:
        yield sent
    finally:
        sa.event.remove(db.reader, "before_cursor_execute", capture)


def _replay_statement(db: Database, interest: feed.Interest) -> tuple[str, Any]:
    """The statement the feed sends to replay `interest` from cursor 0 (`feed._batch`)."""
    with _captured(db) as sent:
        db.read_sync(feed._batch, 0, OTHERS + OWN, interest.sql())
    return next((s, p) for s, p in sent if "job_events" in s and "ORDER BY" in s)


def _indexes_read(db: Database, statement: str, params: Any) -> tuple[set[str], bool]:
    """The indexes the plan of `statement` reads job_events by, and whether it also walks
    the table or its primary key (a scan not bounded by the caller's scope)."""
    with db.reader.connect() as conn:
        if db.dialect == "sqlite":
            steps = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params).all()
            details = [str(step[3]) for step in steps]
            used = {d.split("USING INDEX ")[1].split()[0] for d in details if "USING INDEX " in d}
            walks = any(
                (d.startswith("SCAN job_events") and "USING INDEX ix_job_events_" not in d)
                or "INTEGER PRIMARY KEY" in d
                for d in details
            )
            return used, walks
        (plan,) = conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + statement, params).one()
    nodes = list(_nodes((plan if isinstance(plan, list) else json.loads(plan))[0]["Plan"]))
    used = {
        n["Index Name"]
        for n in nodes
        if n.get("Relation Name") == "job_events" and "Index Name" in n
    }
    walks = any(
        n.get("Relation Name") == "job_events"
        and (n["Node Type"] == "Seq Scan" or n.get("Index Name") == "job_events_pkey")
        for n in nodes
    )
    return used, walks


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", ()):
        yield from _nodes(child)


@pytest.mark.parametrize("statistics", [False, True], ids=["fresh", "analyzed"])
def test_a_replay_is_planned_on_the_callers_scope(services: Services, statistics: bool) -> None:
    db = services.db
    _fill(db)
    if statistics:
        with db.writer.begin() as conn:
            conn.exec_driver_sql("ANALYZE")
    for index, interests in SCOPES.items():
        for interest in interests:
            statement, params = _replay_statement(db, interest)
            used, walks = _indexes_read(db, statement, params)
            assert used == {index} and not walks, (interest, statement, used)


def test_a_key_with_no_events_replays_nothing_of_others(services: Services) -> None:
    """What the plan reads is what the caller may see: its own events, none of others'."""
    db = services.db
    _fill(db)
    for interest in (SCOPES["ix_job_events_producer"][0], SCOPES["ix_job_events_worker"][0]):
        rows, pruned = db.read_sync(feed._batch, 0, None, interest.sql())
        assert (rows, pruned) == ([], 0)
    small = feed.Interest(Actor("small-worker", Role.WORKER))
    rows, _ = db.read_sync(feed._batch, 0, None, small.sql())
    assert len(rows) == OWN // 2 and {r.worker_id for r in rows} == {"small-worker"}


@pytest.fixture(scope="module", params=BACKENDS)
def table_reads(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """A server whose event window holds one event: every replay reads the table."""
    tmp = tmp_path_factory.mktemp("replay")
    yield from start(tmp, str(request.param), event_window=1)


async def test_a_replay_from_cursor_zero_over_websocket_shows_only_the_callers_events(
    table_reads: LiveServer,
) -> None:
    server = table_reads
    busy = server.create_key("PRODUCER", ["email"])
    quiet = server.create_key("PRODUCER", ["email"])
    many = [{"type": "email"}] * 200
    batch = "mutation($i: [EnqueueJobInput!]!) { enqueueJobs(inputs: $i) { jobs { id } } }"
    for _ in range(3):
        server.gql(batch, {"i": many}, busy)
    async with ws(server, quiet) as client:
        op = await client.subscribe({"after": "0"})
        own, cursor = ws_enqueue(server, quiet, "email")
        event = await client.event(op)
        assert (event["job"]["id"], event["cursor"]) == (own, cursor)
