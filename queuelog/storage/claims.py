"""The claim statement, on the driver's cursor like the rest of `storage.driver`."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from queuelog.storage import driver
from queuelog.storage.driver import RETURNING, JobRow
from queuelog.storage.tables import PENDING, RUNNING
from queuelog.storage.tx import Tx


@functools.lru_cache(maxsize=64)
def _sql(dialect: str, several: bool, lease_cases: int, one: bool) -> str:
    """The claim statement: for one type or `several`, with one lease for all
    (`lease_cases` 0) or a CASE of that many types, for `one` job or up to a limit."""
    pg = dialect == "postgresql"
    lease = f"CASE type {'WHEN ? THEN ? ' * lease_cases}END" if lease_cases else "?"
    sets = f"status = '{RUNNING}', worker_id = ?, claimed_at = ?, updated_at = ?"
    sets += f", lease_expires_at = {lease}"
    by_claim_index = "FROM jobs" if pg else "FROM jobs INDEXED BY ix_jobs_claim"
    lock = " FOR UPDATE SKIP LOCKED" if pg else ""
    due = f"status = '{PENDING}' AND type = {'asked.name' if several else '?'} AND run_at <= ?"
    in_order = "ORDER BY priority DESC, run_at, id LIMIT ?"
    merged = "ORDER BY pick.priority DESC, pick.run_at, pick.id LIMIT ?"
    if not several:
        pick = f"SELECT id {by_claim_index} WHERE {due} {in_order}{lock}"
    elif pg:
        pick = (
            "SELECT pick.id FROM unnest(?::text[]) AS asked(name) CROSS JOIN LATERAL"
            f" (SELECT id, priority, run_at FROM jobs WHERE {due} {in_order}{lock}) AS pick"
            f" {merged}"
        )
    else:
        pick = (
            "SELECT pick.id FROM (SELECT value AS name FROM json_each(?)) AS asked"
            " CROSS JOIN jobs AS pick WHERE pick.id IN"
            f" (SELECT id {by_claim_index} WHERE {due} {in_order}) {merged}"
        )
    if not pg:  # one writer: nothing changes a row between the pick and the update
        return f"UPDATE jobs SET {sets} WHERE id IN ({pick}) {RETURNING}"
    if one:
        return f"UPDATE jobs SET {sets} WHERE id = ({pick}) {RETURNING}"
    return f"UPDATE jobs SET {sets} WHERE id = ANY (ARRAY({pick})) {RETURNING}"


def claim(
    tx: Tx,
    *,
    worker: str,
    now: datetime,
    types: Sequence[str],
    limit: int,
    lease_until: Mapping[str, datetime],
) -> list[JobRow]:
    """Claim up to `limit` pending jobs of `types` that are due, most urgent first.

    ix_jobs_claim is (type, priority DESC, run_at, id) over pending jobs. The pick reads one
    range of it per type, each type's first `limit` due jobs in claim order, and keeps the
    first `limit` of those: it never walks the pending jobs of a type it was not asked for.
    Several types go in as one parameter (a JSON array on SQLite, an array on PostgreSQL),
    so the text is the same whatever their number; one type is its range alone.

    It names the literal status (a bound one would not match the partial index's WHERE).
    SQLite has no LATERAL: a correlated `IN`, run once per type, reads the ranges, and
    INDEXED BY holds its planner, which has no statistics, to the claim index. PostgreSQL
    reads them with a LATERAL join and locks each type's rows as it picks them, skipping
    rows another claim has locked: a claim of several types may hold, until it commits, up
    to `limit` jobs of each that it does not take. Locking a row re-evaluates the pick's
    WHERE (`status = 'pending'` included) on its newest version, and the lock keeps it so
    until the claim commits: so the update re-checks no status, and finds the picked rows
    on the primary key: `id = (pick)` for one job, `id = ANY(ARRAY(pick))` for more.

    psycopg prepares a statement it runs often, and PostgreSQL may then keep one generic
    plan of it, made from the table's size at the time and not knowing `limit` or how many
    ids the pick returns. A join to the picked rows (a form before) was a hash join over
    every row of jobs; a status re-check let the plan read them by a scan of every pending
    job; and `id = ANY(...)`, planned while the table was small, read every row of jobs
    (the plan kept as the backlog grew: 3 ms a claim at 20k jobs, seen in the benchmark).
    One job's `id = (pick)` is one row by the primary key, whatever the table's size; a
    claim of more is planned anew each time (its planning is shared by its jobs).
    """
    types = list(dict.fromkeys(types))  # a type asked for twice is read once
    leases = set(lease_until.values())
    lease_params: list[Any]
    if len(leases) == 1:
        lease_cases, lease_params = 0, [leases.pop()]
    else:
        lease_cases = len(lease_until)
        lease_params = [x for pair in lease_until.items() for x in pair]
    params: list[Any] = [worker, now, now, *lease_params]
    if len(types) == 1:
        params += [types[0], now, limit]
    else:
        asked = types if tx.dialect == "postgresql" else json.dumps(types)
        params += [asked, now, limit, limit]
    pg, one = tx.dialect == "postgresql", limit == 1
    text = _sql(tx.dialect, len(types) > 1, lease_cases, one)
    rows = driver.execute(tx, text, params, prepare=False if pg and not one else None)
    rows.sort(key=lambda r: (-r.priority, r.run_at, r.id))
    return rows
