"""The limited claim's row locks on PostgreSQL: a transaction that holds one type's row never
waits for a type's row that sorts before it (it skips that type instead), so transactions
that claim limited types in different orders (claims of a group commit) cannot deadlock."""

from __future__ import annotations

from contextlib import ExitStack
from datetime import timedelta

import pytest

from queuelog.storage import job_types as types_sql
from queuelog.storage.db import Database
from queuelog.storage.tx import Tx
from tests.storage.rows import T0, insert, job


def _limited(db: Database, *names: str) -> None:
    for name in names:
        db.write_sync(types_sql.upsert, name, {"max_running": 5, "updated_at": T0})


def _claim(tx: Tx, name: str) -> list[int]:
    rows = types_sql.claim_limited(
        tx, worker="w1", now=T0, name=name, limit=5, lease_until=T0 + timedelta(seconds=60)
    )
    return [r.id for r in rows]


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_transaction_holding_a_later_type_skips_an_earlier_one_held_elsewhere(
    db: Database,
) -> None:
    _limited(db, "email", "sync")
    (email,) = insert(db, job(type="email"))
    (sync,) = insert(db, job(type="sync"))
    with ExitStack() as stack:
        a, b = (stack.enter_context(db.writer.connect()) for _ in range(2))
        a.exec_driver_sql("SET lock_timeout = '5s'")  # a wait would fail the test, not hang it
        tx_a, tx_b = Tx(a, db.sql), Tx(b, db.sql)
        assert _claim(tx_b, "email") == [email]  # b holds email's row
        assert _claim(tx_a, "sync") == [sync]  # a holds sync's row
        assert _claim(tx_a, "email") == []  # a may not wait for email: it skips it
        b.rollback()  # email's row is free again
        (again,) = insert(db, job(type="email"))
        assert _claim(tx_a, "email") == [email, again]  # free: taken without waiting
        a.rollback()
