"""Bulk cancel and retry: a single cancel's or retry's transition, applied to every job a
filter matches, in batches: a read finds each batch's jobs, then a short write transaction
changes them by id, so that other writers get their turn and no filter's search ever holds
the write lock."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from queuelog.domain.lifecycle import CANCEL, RETRY, Transition
from queuelog.service import validation
from queuelog.service.models import Actor
from queuelog.service.visibility import scope
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database
from queuelog.storage.filters import JobFilter
from queuelog.storage.tx import Tx

BULK_MAX = 10_000
# Jobs changed in one write transaction.
BATCH = 100


def cancel_values(now: datetime) -> dict[str, Any]:
    """The columns CANCEL sets, for one cancel or many."""
    return {"finished_at": now, "updated_at": now}


def retry_values(now: datetime) -> dict[str, Any]:
    """The columns RETRY sets, for one retry or many: a fresh set of attempts, due now."""
    return {"retry_count": 0, "run_at": now, "updated_at": now}


VALUES: Mapping[str, Callable[[datetime], dict[str, Any]]] = {
    CANCEL.name: cancel_values,
    RETRY.name: retry_values,
}


async def apply_to_matching(
    db: Database,
    clock: Callable[[], datetime],
    actor: Actor,
    transition: Transition,
    match: JobFilter,
    limit: int,
) -> tuple[int, bool]:
    """Apply `transition` to up to `limit` jobs that `actor` may see, `match` and are in
    one of its source statuses, oldest first; how many changed, and whether more match.

    Each batch's jobs are found by a read, which may take long (a payload filter tests
    every job it passes) but holds no write lock and keeps to the request's deadline; the
    write then changes those jobs by id, checking again that each still matches."""
    validation.bounded(limit, 1, BULK_MAX, "limit", ["limit"])
    changed = 0
    after: int | None = None  # the last id read: each read goes on past it
    while changed < limit:
        size = min(BATCH, limit - changed)
        ids = await db.read(_find, actor, transition, match, size, after)
        if ids:
            changed += await db.write(_batch, clock, actor, transition, match, ids)
            after = ids[-1]
        if len(ids) < size:
            return changed, False
    left = await db.read(_find, actor, transition, match, 1, after)
    return changed, bool(left)


def _find(
    tx: Tx, actor: Actor, transition: Transition, match: JobFilter, size: int, after: int | None
) -> list[int]:
    """The ids of the next `size` jobs to change, past id `after`."""
    return jobs_sql.ids_matching(
        tx,
        scope=scope(actor),
        match=match,
        statuses=transition.source_values,
        limit=size,
        after_id=after,
    )


def _batch(
    tx: Tx,
    clock: Callable[[], datetime],
    actor: Actor,
    transition: Transition,
    match: JobFilter,
    ids: list[int],
) -> int:
    """One transaction's share: the jobs of `ids` that still match, changed (the
    compare-and-set passes only those still in a source status); how many changed."""
    still = jobs_sql.still_matching(tx, scope=scope(actor), match=match, ids=ids)
    values = VALUES[transition.name](clock())
    return sum(jobs_sql.apply(tx, transition, i, values) is not None for i in still)
