"""How a filtered list of jobs is read in id order: its ids first, then the rows of those.

Finding the ids reads indexes where it can and sorts ids, not whole rows (sorting the
payloads along cost more than finding the jobs); the page's rows are then read by primary key.

A list by type walks the id order back until it has its page, unless the job counts say its
types' jobs are few: then it reads them all through the type indexes and sorts their ids.
Pending jobs of a type are found only through ix_jobs_claim (the rule, and why, is at
ix_jobs_status_type in `storage.tables`), so such a list reads two branches, its pending
jobs (ix_jobs_claim) and its others (ix_jobs_status_type), each taking its first `limit`,
merged. Statuses are written into the statement as literals: a partial index serves a
condition only where the planner sees that it implies the index's predicate, which bound
values hide from SQLite's planner and from PostgreSQL's generic plans. Where the backend's
planner wants it (`Dialect.wants_shares`: SQLite's statistics, when it has any, average
over a column's values), each condition on a type, status or producer carries its share
of the jobs.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from queuelog.domain.lifecycle import PENDING, Status
from queuelog.storage import counts as counts_sql
from queuelog.storage.filters import JobFilter
from queuelog.storage.scope import Scope
from queuelog.storage.tables import jobs
from queuelog.storage.tx import Tx

J = jobs.c
ALL_STATUSES = tuple(s.value for s in Status)


def ids(
    tx: Tx,
    *,
    scope: Scope,
    match: JobFilter,
    limit: int,
    newest: bool = True,
    before_id: int | None = None,
    after_id: int | None = None,
) -> sa.Select[int]:
    """The ids of the first `limit` jobs in `scope` that `match` (with id below `before_id`,
    above `after_id`, when given), newest or oldest first."""
    producers = {p for p in (scope.producer, match.producer) if p is not None}
    rest = match._replace(statuses=None, types=None, producer=None).where(tx.dialect)
    rest += scope._replace(producer=None).where(jobs)
    order = match.id_order()
    if before_id is not None:
        rest.append(J.id < before_id)
        order = J.id  # a later page's walk back starts at its cursor, inside any window
    if after_id is not None:
        rest.append(J.id > after_id)
    shares = None
    if match.types is not None:
        shares = _Shares(tx, match.types, next(iter(producers)) if producers else None)
    few = shares is not None and shares.few(limit)
    hint = shares.hint if shares is not None and few and tx.dialect.wants_shares else None
    selects = []
    for statuses in _branches(match) if few else [match.statuses]:
        # SQLite tests the conditions an index leaves in this order: the cheap ones first.
        terms: list[tuple[str, sa.ColumnElement[bool]]] = [
            ("producer", J.producer == p) for p in sorted(producers)
        ]
        if statuses is not None:
            terms.append(("statuses", _status_is(statuses)))
        if match.types is not None:
            terms.append(("types", J.type.in_(match.types)))
        where = [t if hint is None else hint(tx, name, t, statuses) for name, t in terms]
        by = order.desc() if newest else order.asc()
        selects.append(sa.select(J.id).where(*where, *rest).order_by(by).limit(limit))
    if len(selects) == 1:
        return selects[0]
    union = sa.union_all(*(sa.select(s.subquery().c.id) for s in selects)).subquery()
    by = union.c.id.desc() if newest else union.c.id.asc()
    return sa.select(union.c.id).order_by(by).limit(limit)


def _branches(match: JobFilter) -> list[tuple[str, ...]]:
    """The statuses each branch of a list by type reads: its pending ones, its others."""
    wanted = ALL_STATUSES if match.statuses is None else match.statuses
    pending = tuple(s for s in wanted if s == PENDING)
    others = tuple(s for s in wanted if s != PENDING)
    return [b for b in (pending, others) if b] or [()]


def _status_is(statuses: Sequence[str]) -> sa.ColumnElement[bool]:
    """`status` is one of `statuses`, written as literals (they are the enum's values)."""
    if len(statuses) == 1:
        return J.status == sa.literal(statuses[0], J.status.type, literal_execute=True)
    values: sa.BindParameter[tuple[str, ...]] = sa.bindparam(
        "statuses", tuple(statuses), expanding=True, unique=True, literal_execute=True
    )
    return J.status.in_(values)


class _Shares:
    """How many jobs there are of a list's types, of its producer and of each status, from
    the job counts."""

    def __init__(self, tx: Tx, types: Sequence[str], producer: str | None) -> None:
        found = counts_sql.by_status_of(tx, types, producer)
        self.of_status = {status: n for status, (n, _, _) in found.items()}
        self.total = max(1, sum(self.of_status.values()))
        self.of = {
            "types": sum(n for _, n, _ in found.values()),
            "producer": sum(n for _, _, n in found.values()),
        }

    def few(self, limit: int) -> bool:
        """Whether reading every job of the types costs less than walking the id order to
        `limit` of them, which passes about `limit * total / typed` jobs."""
        typed = self.of["types"]
        return typed * typed <= limit * self.total

    def hint(
        self, tx: Tx, name: str, term: sa.ColumnElement[bool], statuses: Sequence[str] | None
    ) -> sa.ColumnElement[bool]:
        """`term` (the list's condition on `name`) marked with its share of all jobs."""
        if name == "statuses":
            n = sum(self.of_status.get(s, 0) for s in statuses or ())
        else:
            n = self.of[name]
        return tx.dialect.likelihood(term, n / self.total)
