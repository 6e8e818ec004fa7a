"""Storage conformance: the claim (order, types, limits, leases, races) and its query plans
on each backend."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import sqlalchemy as sa

from queuelog.storage import events as events_sql
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database
from queuelog.storage.scope import EVERYTHING
from queuelog.storage.tables import job_events
from queuelog.storage.tx import Tx
from tests.storage.plans import (
    Captured,
    pg_generic_plan,
    pg_nodes,
    pg_pick,
    sqlite_plan,
    sqlite_steps,
    until_limit,
)
from tests.storage.rows import T0, at, claim, events_of, insert, job

# -- claim ------------------------------------------------------------------------------------


def test_claim_order_is_priority_then_run_at_then_id(db: Database) -> None:
    ids = insert(
        db,
        job(priority=0, run_at=at(-50)),  # 0: low, oldest
        job(priority=20, run_at=at(-10)),  # 1: high, newer
        job(priority=20, run_at=at(-30)),  # 2: high, older
        job(priority=30, run_at=at(-1)),  # 3: critical
        job(priority=20, run_at=at(-30)),  # 4: high, same run_at as 2, higher id
        job(priority=10, run_at=at(-40)),  # 5: medium
        job(priority=30, run_at=at(10)),  # 6: critical but not due yet
    )
    claimed = claim(db, limit=100)
    assert [r.id for r in claimed] == [ids[i] for i in (3, 2, 4, 1, 5, 0)]
    assert all(r.status == "running" and r.worker_id == "w1" for r in claimed)
    assert all(r.claimed_at == T0 and r.lease_expires_at == at(60) for r in claimed)
    future = db.read_sync(jobs_sql.get, ids[6])
    assert future is not None and future.status == "pending" and future.worker_id is None
    # Once due, it is claimable.
    assert [r.id for r in claim(db, now=at(10))] == [ids[6]]
    assert claim(db, now=at(1000)) == []


def test_claim_one_at_a_time_follows_the_same_order(db: Database) -> None:
    ids = insert(db, job(priority=10), job(priority=30), job(priority=10), job(priority=0))
    order = [claim(db, limit=1)[0].id for _ in ids]
    assert order == [ids[1], ids[0], ids[2], ids[3]]


def test_claim_filters_types_and_respects_limit(db: Database) -> None:
    ids = insert(db, *(job(type="pdf") for _ in range(3)), *(job(type="email") for _ in range(3)))
    got = claim(db, types=("email",), limit=2)
    assert [r.id for r in got] == ids[3:5]
    assert {r.type for r in got} == {"email"}
    assert [r.id for r in claim(db, types=("sync",))] == []
    assert [r.id for r in claim(db, types=("pdf", "email"), limit=10)] == [*ids[:3], ids[5]]


def test_claim_gives_each_type_its_own_lease(db: Database) -> None:
    insert(db, job(type="email"), job(type="pdf"), job(type="sync"))
    lease = {"email": at(60), "pdf": at(900), "sync": at(5)}
    got = claim(db, types=("email", "pdf", "sync"), lease=lease)
    assert {r.type: r.lease_expires_at for r in got} == lease


def test_claim_records_pending_to_running(db: Database) -> None:
    (job_id,) = insert(db, job())
    claim(db)
    assert events_of(db, job_id) == [(None, "pending"), ("pending", "running")]
    (event,) = db.read_sync(events_sql.after, 0, 10, statuses=["running"])
    assert (event.job_id, event.worker_id, event.occurred_at) == (job_id, "w1", T0)


def test_claim_takes_the_first_due_jobs_across_the_types_asked(db: Database) -> None:
    """Each type's jobs are read apart and then merged: across the types asked the order is
    still priority, then run_at, then id; the limit counts across them; jobs not yet due
    wait; the jobs of a type not asked, all ahead in that order, stay pending."""
    backlog = insert(db, *(job(type="pdf", priority=30, run_at=at(-100 - i)) for i in range(500)))
    mine = insert(
        db,
        job(type="email", priority=10, run_at=at(-5)),  # 0
        job(type="sync", priority=10, run_at=at(-5)),  # 1: as 0, a higher id
        job(type="sync", priority=20, run_at=at(-1)),  # 2
        job(type="email", priority=30, run_at=at(5)),  # 3: first once due
        job(type="email", priority=0, run_at=at(-50)),  # 4
        job(type="sync", priority=10, run_at=at(-6)),  # 5: older than 0 and 1
        job(type="email", priority=20, run_at=at(-1)),  # 6: as 2, a higher id
    )
    got = claim(db, types=("email", "sync"), limit=4)  # two of each type
    assert [r.id for r in got] == [mine[i] for i in (2, 6, 5, 0)]
    assert all(r.status == "running" for r in got)
    # A type asked for twice is read once: both remaining due jobs, not one of them twice.
    got = claim(db, types=("sync", "sync", "email"), limit=2)
    assert [r.id for r in got] == [mine[1], mine[4]]
    assert claim(db, types=("email", "sync")) == []
    assert [r.id for r in claim(db, types=("sync", "email"), now=at(5))] == [mine[3]]
    left = db.read_sync(lambda tx: jobs_sql.counts(tx, scope=EVERYTHING, job_type="pdf"))
    assert left["pending"] == len(backlog)
    assert [r.id for r in claim(db, types=("pdf",), limit=2)] == backlog[:-3:-1]  # oldest


def test_claim_may_ask_for_many_types_at_once(db: Database) -> None:
    """More types than SQLite takes terms in one compound SELECT (500)."""
    ids = insert(db, job(type="t599", priority=10), job(type="t7"), job(type="email", priority=20))
    many = tuple(f"t{i}" for i in range(600))
    assert [r.id for r in claim(db, types=many, limit=5)] == [ids[0], ids[1]]
    assert [r.id for r in claim(db, types=(*many, "email"))] == [ids[2]]


def test_workers_claiming_several_types_at_once_never_share_a_job(db: Database) -> None:
    """Six workers on two Databases (as on two servers) claim three types at once, several
    jobs a claim: the database settles every race, and each job is claimed once."""
    kinds = ("email", "pdf", "sync")
    ids = set(insert(db, *(job(type=kinds[i % 3], priority=i % 4 * 10) for i in range(600))))
    other = Database(db.url.render_as_string(hide_password=False))

    def drain(n: int) -> list[int]:
        held: list[int] = []
        while got := claim((db, other)[n % 2], types=kinds, limit=3, worker=f"w{n}"):
            held += [r.id for r in got]
        return held

    try:
        with ThreadPoolExecutor(6) as pool:
            held = list(pool.map(drain, range(6)))
    finally:
        other.close()
    claimed = [job_id for mine in held for job_id in mine]
    assert sorted(claimed) == sorted(ids)  # each job exactly once
    assert sum(1 for mine in held if mine) > 1

    def claims(tx: Tx) -> list[int]:
        E = job_events.c
        stmt = sa.select(sa.func.count()).where(E.status == "running").group_by(E.job_id)
        return list(tx.conn.execute(stmt).scalars())

    assert sorted(set(db.read_sync(claims))) == [1]


ONE_OR_SEVERAL = pytest.mark.parametrize(
    "types", [("email",), ("email", "sync")], ids=["one type", "several types"]
)


@ONE_OR_SEVERAL
def test_a_claim_does_not_read_the_backlog_of_other_types(
    db: Database, monkeypatch: pytest.MonkeyPatch, types: tuple[str, ...]
) -> None:
    """A worker for one type pays nothing for another type's backlog. Work, not time, is
    measured: SQLite's virtual-machine steps, PostgreSQL's rows read (the old plan walked
    every pending job of other types that sorted ahead of the first one of its own)."""
    backlog = 2_000
    insert(db, *(job(type="pdf", priority=30, run_at=at(-i - 1)) for i in range(backlog)))
    first, second = insert(db, job(type="email"), job(type="email"))
    if db.dialect == "sqlite":

        def counted(tx: Tx) -> tuple[list[Any], int]:
            until = dict.fromkeys(types, at(60))
            with sqlite_steps(tx) as steps:
                rows = jobs_sql.claim(
                    tx, worker="w1", now=T0, types=types, limit=1, lease_until=until
                )
            return rows, steps[0]

        rows, steps = db.write_sync(counted)
        assert [r.id for r in rows] == [first]
        assert steps < backlog / 4, steps
        return
    sent = Captured(db, monkeypatch)
    assert [r.id for r in claim(db, types=types, limit=1)] == [first]
    statement, params = sent.last("UPDATE jobs")
    plan = pg_generic_plan(db, statement, params, analyze=True)  # claims `second`
    read = sum(
        n["Actual Rows"] * n["Actual Loops"] + n.get("Rows Removed by Filter", 0)
        for n, _ in pg_nodes(plan)
        if n.get("Relation Name") == "jobs" and n["Node Type"] != "ModifyTable"
    )
    assert 1 <= read < 10, plan
    row = db.read_sync(jobs_sql.get, second)
    assert row is not None and row.status == "pending"  # EXPLAIN ANALYZE was rolled back


@ONE_OR_SEVERAL
def test_claim_reads_one_range_of_the_claim_index_per_type(
    db: Database, monkeypatch: pytest.MonkeyPatch, types: tuple[str, ...]
) -> None:
    """The claim statement, as the server runs it, reads ix_jobs_claim by type: one range
    per type, each already in claim order (no sort of a type's pending jobs: a full sort
    per claim is 300x slower at 100k pending), and no scan of the other types' jobs."""
    insert(db, *(job(type=("email", "pdf")[i % 2], priority=(i % 4) * 10) for i in range(300)))
    sent = Captured(db, monkeypatch)
    assert len(claim(db, types=types, limit=1)) == 1
    statement, params = sent.last("UPDATE jobs")
    if db.dialect == "sqlite":
        plan = sqlite_plan(db, statement, params)
        ranges = [
            p for p, d in plan if d.startswith("SEARCH jobs USING INDEX ix_jobs_claim (type=?")
        ]
        assert ranges, plan
        for parent in ranges:  # the subquery that reads a type's range sorts nothing
            assert not any(p == parent and "TEMP B-TREE" in d for p, d in plan), plan
        scans = [d for _, d in plan if d.startswith("SCAN")]  # of no table: jobs are SEARCHed
        assert all(
            "VIRTUAL TABLE" in d or d.startswith(("SCAN (subquery", "SCAN CONSTANT ROW"))
            for d in scans
        ), plan
    else:
        plan = pg_generic_plan(db, statement, params)
        pick = pg_pick(plan)
        nodes = list(pg_nodes(pick))
        ranges = [(n, up) for n, up in nodes if n.get("Index Name") == "ix_jobs_claim"]
        assert ranges, plan
        for node, above in ranges:
            # type = the one asked (a parameter, or the LATERAL join's type): not = ANY(...)
            assert re.search(r"\(type\)::text = (\$\d|asked\.)", node.get("Index Cond", "")), node
            assert "Sort" not in until_limit(above), plan
        scans = [n["Node Type"] for n, _ in nodes if n.get("Relation Name") == "jobs"]
        assert scans == ["Index Scan"], scans  # the pick reads nothing else of jobs


@ONE_OR_SEVERAL
def test_no_other_index_can_serve_a_claim(
    db: Database, monkeypatch: pytest.MonkeyPatch, types: tuple[str, ...]
) -> None:
    """Without statistics (a new table), or with stale ones taken while the queue was empty,
    PostgreSQL estimates one pending job, and every index that can find `status = 'pending'
    AND type = ?` then costs the same as the claim index. It picked (status, type) and sorted
    the whole backlog on every claim: 23 ms a claim at 50k pending, seen in the benchmark
    (claim+complete fell from ~1,700 to ~70 cycles/s). So no index but ix_jobs_claim may
    serve the pick: without it, the pick scans the table, which no estimate makes cheap."""
    if db.dialect != "postgresql":
        pytest.skip("SQLite's claim names its index (INDEXED BY)")
    done = {"status": "completed", "finished_at": T0}
    insert(db, *(job(type=("email", "pdf")[i % 2], **done) for i in range(3_000)))
    insert(db, *(job(type=("email", "pdf")[i % 2]) for i in range(20)))
    sent = Captured(db, monkeypatch)
    assert len(claim(db, types=types, limit=1)) == 1
    statement, params = sent.last("UPDATE jobs")
    plan = pg_generic_plan(db, statement, params, without_index="ix_jobs_claim")
    pick = pg_pick(plan)
    used = [n.get("Index Name") for n, _ in pg_nodes(pick) if n.get("Relation Name") == "jobs"]
    assert used and used == [None] * len(used), plan  # the pick reads jobs, by no index


@ONE_OR_SEVERAL
def test_a_claim_keeps_no_plan_that_reads_every_job(
    db: Database, monkeypatch: pytest.MonkeyPatch, types: tuple[str, ...]
) -> None:
    """psycopg prepares a statement it runs often, and PostgreSQL may keep one generic plan
    of it, made from the table's size then. Planned while the table was small, the update
    of a claim read every row of jobs to find the picked ids, and kept doing so as the
    backlog grew (3 ms a claim at 20k jobs in the benchmark). A claim of one job finds it by
    the primary key in a plan made on an empty table; a claim of more is never prepared."""
    if db.dialect != "postgresql":
        pytest.skip("SQLite plans each statement as it prepares it, and keeps no plan")
    sent = Captured(db, monkeypatch)
    for _ in range(6):  # psycopg prepares from the fifth run
        assert claim(db, types=types, limit=1) == []
        assert claim(db, types=types, limit=5) == []
    assert sent.prepare == [None, False] * 6  # the claim of one prepared as psycopg sees fit
    plan = pg_generic_plan(db, *sent.last("= (SELECT"), statistics=False)  # an empty table's
    reads = [
        (n["Node Type"], n.get("Index Name"))
        for n, _ in pg_nodes(plan)
        if n.get("Relation Name") == "jobs" and n["Node Type"] != "ModifyTable"
    ]
    assert ("Index Scan", "jobs_pkey") in reads, plan
    assert all(index is not None for _, index in reads), plan  # no scan of the table
    prepared = db.write_sync(
        lambda tx: (
            tx.conn.exec_driver_sql("SELECT statement FROM pg_prepared_statements").scalars().all()
        )
    )
    assert any("= (SELECT" in p for p in prepared), prepared
    assert not any("ANY (ARRAY(" in p for p in prepared), prepared
