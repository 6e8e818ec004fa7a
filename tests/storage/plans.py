"""The statements `storage.driver` sends, and the plans each backend makes of them: shared by
the conformance tests that check a statement reads the index it should."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from queuelog.storage import driver
from queuelog.storage.db import Database


class Captured:
    """The statements `storage.driver` sends, with their parameters bound as it binds them."""

    def __init__(self, db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[tuple[str, list[Any]]] = []
        self.prepare: list[bool | None] = []  # each statement's `prepare`
        execute = driver.execute

        def capture(tx: Any, text: str, params: Any, prepare: bool | None = None) -> Any:
            params = list(params)
            self.sent.append((text, [tx.dialect.bind(tx, p) for p in params]))
            self.prepare.append(prepare)
            return execute(tx, text, params, prepare)

        monkeypatch.setattr(driver, "execute", capture)

    def last(self, contains: str) -> tuple[str, list[Any]]:
        return next(s for s in reversed(self.sent) if contains in s[0])


def sqlite_plan(db: Database, statement: str, params: list[Any]) -> list[tuple[int, str]]:
    """EXPLAIN QUERY PLAN: (parent, detail) for each step."""
    with db.reader.connect() as conn:
        rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, tuple(params)).all()
    return [(int(r[1]), str(r[3])) for r in rows]


def pg_nodes(
    node: dict[str, Any], above: tuple[dict[str, Any], ...] = ()
) -> Iterator[tuple[dict[str, Any], tuple[dict[str, Any], ...]]]:
    """Every node of a JSON plan, with the nodes above it (outermost first)."""
    yield node, above
    for child in node.get("Plans", ()):
        yield from pg_nodes(child, (*above, node))


def pg_pick(plan: dict[str, Any]) -> dict[str, Any]:
    """A claim's pick: the InitPlan that reads jobs (the paused-or-limited probe of
    job_types, a one-time filter, is another InitPlan, of that one or beside it)."""
    (pick,) = [
        n
        for n, above in pg_nodes(plan)
        if n.get("Parent Relationship") == "InitPlan"
        and not any(a.get("Parent Relationship") == "InitPlan" for a in above)
        and any(m.get("Relation Name") == "jobs" for m, _ in pg_nodes(n))
    ]
    return pick


def until_limit(above: tuple[dict[str, Any], ...]) -> list[str]:
    """The node types between a node and the nearest Limit above it (which must exist)."""
    types = [n["Node Type"] for n in reversed(above)]
    assert "Limit" in types, types
    return types[: types.index("Limit")]


def pg_generic_plan(
    db: Database,
    statement: str,
    params: list[Any],
    *,
    analyze: bool = False,
    without_index: str | None = None,
    statistics: bool = True,
) -> dict[str, Any]:
    """EXPLAIN (as JSON) the generic plan of `statement`: the plan a prepared statement
    (psycopg prepares a query it runs often) may settle on, made without knowing the
    parameters. With `analyze`, runs it too; `without_index`, as if that index were not
    there; both in a transaction rolled back. `statistics=False`: with the table's
    statistics as they are, not fresh."""
    with db.reader.connect() as conn:
        raw = conn.connection.driver_connection
        assert isinstance(raw, psycopg.Connection)
        numbered = iter(range(1, len(params) + 1))
        prepared = re.sub(r"\?|%s", lambda m: f"${next(numbered)}", statement)
        args = ", ".join(psycopg.ClientCursor(raw).mogrify("%s", [p]) for p in params)
        options = "ANALYZE, FORMAT JSON" if analyze else "FORMAT JSON"
        try:
            if statistics:
                raw.execute("ANALYZE jobs")
            if without_index is not None:
                raw.execute(f"DROP INDEX {without_index}".encode())
            raw.execute("SET plan_cache_mode = force_generic_plan")
            raw.execute(f"PREPARE claim_plan AS {prepared}".encode())
            found = raw.execute(f"EXPLAIN ({options}) EXECUTE claim_plan({args})".encode())
            (explained,) = found.fetchone() or ()
        finally:
            raw.rollback()  # and with it the statement's writes, PREPARE and SET
    plan: dict[str, Any] = explained[0]["Plan"]
    return plan


def plans_kept(tx: Any, containing: str) -> list[tuple[int, int]]:
    """PostgreSQL: (generic plans, custom plans) so far of each statement prepared on this
    transaction's connection whose text contains `containing`."""
    found = tx.conn.exec_driver_sql(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
        " WHERE strpos(statement, %(text)s) > 0",
        {"text": containing},
    )
    return [(int(g), int(c)) for g, c in found.all()]


@contextlib.contextmanager
def sqlite_steps(tx: Any) -> Iterator[list[int]]:
    """The SQLite virtual-machine steps run inside the block, on `tx`'s connection: the
    work a statement did, whatever plan it took ([0] once the block ends)."""
    raw = tx.conn.connection.driver_connection
    assert raw is not None
    steps = [0]

    def step() -> int:
        steps[0] += 1
        return 0

    raw.set_progress_handler(step, 1)
    try:
        yield steps
    finally:
        raw.set_progress_handler(None, 1)
