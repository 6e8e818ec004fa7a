"""A limited claim sets its picked jobs RUNNING by their ids: the statement must find them
by primary key, whatever the size of the backlog (SQLite, never ANALYZEd, otherwise walked
every pending job through the status index: ~100 ms a claim at 300k pending jobs)."""

from __future__ import annotations

import pytest

from queuelog.storage.db import Database
from tests.storage.plans import sqlite_plan
from tests.storage.rows import T0, at, insert, job


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_claiming_picked_ids_reads_them_by_primary_key(db: Database) -> None:
    ids = insert(db, *(job() for _ in range(20)))
    params = db.sql.claim_ids_params("w1", T0, at(60), ids[:2])
    bound = [db.sql.bind_text(p) if p in (T0, at(60)) else p for p in params]
    plan = [d for _, d in sqlite_plan(db, db.sql.CLAIM_IDS, bound)]
    assert plan[0] == "SEARCH jobs USING INTEGER PRIMARY KEY (rowid=?)", plan
