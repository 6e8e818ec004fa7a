"""Bulk cancel and retry: a single cancel's or retry's transition, applied to every job a
filter matches, in short write transactions so other writers get their turn between them."""

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
    one of its source statuses, oldest first; how many changed, and whether more match."""
    validation.bounded(limit, 1, BULK_MAX, "limit", ["limit"])
    changed = 0
    while changed < limit:
        size = min(BATCH, limit - changed)
        n, full = await db.write(_batch, clock, actor, transition, match, size)
        changed += n
        if not full:
            return changed, False
    left = await db.read(
        jobs_sql.ids_matching,
        scope=scope(actor),
        match=match,
        statuses=transition.source_values,
        limit=1,
    )
    return changed, bool(left)


def _batch(
    tx: Tx,
    clock: Callable[[], datetime],
    actor: Actor,
    transition: Transition,
    match: JobFilter,
    size: int,
) -> tuple[int, bool]:
    """One transaction's share: how many jobs changed, and whether it found a full batch."""
    ids = jobs_sql.ids_matching(
        tx, scope=scope(actor), match=match, statuses=transition.source_values, limit=size
    )
    values = VALUES[transition.name](clock())
    changed = sum(jobs_sql.apply(tx, transition, i, values) is not None for i in ids)
    return changed, len(ids) == size
