"""Which jobs a filtered list or a bulk action reads: the storage form of the API's JobFilter.

Every condition given must hold; a tuple matches any of its values. Who may read which rows
is `Scope`'s part, applied beside this. JSON containment differs per backend: the dialect
turns it into SQL (`Dialect.payload_contains`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

import sqlalchemy as sa

from queuelog.storage.tables import jobs

if TYPE_CHECKING:
    from queuelog.storage.dialect import Dialect

J = jobs.c


class JobFilter(NamedTuple):
    ids: tuple[int, ...] | None = None
    statuses: tuple[str, ...] | None = None
    types: tuple[str, ...] | None = None
    producer: str | None = None
    worker_id: str | None = None
    idempotency_key: str | None = None
    concurrency_key: str | None = None
    created_after: datetime | None = None  # exclusive
    created_before: datetime | None = None  # exclusive
    payload_contains: str | None = None  # the JSON text of an object

    def where(self, dialect: Dialect) -> list[sa.ColumnElement[bool]]:
        cond: list[sa.ColumnElement[bool]] = []
        if self.ids is not None:
            cond.append(J.id.in_(self.ids))
        if self.statuses is not None:
            cond.append(J.status.in_(self.statuses))
        if self.types is not None:
            cond.append(J.type.in_(self.types))
        if self.producer is not None:
            cond.append(J.producer == self.producer)
        if self.worker_id is not None:
            cond.append(J.worker_id == self.worker_id)
        if self.idempotency_key is not None:
            cond.append(J.idempotency_key == self.idempotency_key)
        if self.concurrency_key is not None:
            cond.append(J.concurrency_key == self.concurrency_key)
        if self.created_after is not None:
            cond.append(J.created_at > self.created_after)
        if self.created_before is not None:
            cond.append(J.created_at < self.created_before)
        if self.payload_contains is not None:
            cond.append(dialect.payload_contains(J.payload, self.payload_contains))
        return cond

    def narrowed(self, status: str | None, job_type: str | None) -> JobFilter:
        """This filter, and of `status` and of `job_type` too when given."""
        return self._replace(
            statuses=_also(self.statuses, status), types=_also(self.types, job_type)
        )

    def counted(self) -> bool:
        """Whether the job counts say how many jobs match: the filter names nothing but
        statuses, types and a producer, what they count by."""
        return self._replace(statuses=None, types=None, producer=None) == EVERY_JOB

    def id_order(self) -> sa.ColumnElement[int]:
        """What matching jobs are ordered by: their id. A creation window that ended longer
        ago than it lasted is read through ix_jobs_created and its rows sorted (`id + 0`
        hides the primary key's order): walking the primary key back from the newest job
        would pass every job created since, as jobs' ids follow their creation times (the
        planners reckon matches spread evenly over the ids)."""
        after, before = self.created_after, self.created_before
        if after is not None and before is not None and before - after < _now() - before:
            return J.id + 0
        return J.id


def _also(values: tuple[str, ...] | None, one: str | None) -> tuple[str, ...] | None:
    if one is None:
        return values
    return (one,) if values is None else tuple(v for v in values if v == one)


def _now() -> datetime:
    return datetime.now(UTC)


EVERY_JOB = JobFilter()


# The work one stored payload's containment test may take, in steps (a wanted value
# looked for, an array item passed or gathered for lookup): a fraction of a second at
# most. A payload that needs more counts as not containing the filter: the service
# bounds a filter's shape, so only a payload built to be slow to search (long arrays of
# arrays) gets there, and it would hold the reader for it.
CONTAINS_STEPS = 100_000


class _OverBudget(Exception):
    pass


class _Search:
    """One payload's containment test: its steps left, and the scalars of each of its
    arrays already gathered (by the array's identity), so that each wanted scalar is one
    set lookup rather than a pass over the array."""

    __slots__ = ("scalars", "steps")

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.scalars: dict[int, set[tuple[str, Any]]] = {}

    def spend(self, n: int) -> None:
        self.steps -= n
        if self.steps < 0:
            raise _OverBudget

    def scalars_of(self, array: list[Any]) -> set[tuple[str, Any]]:
        found = self.scalars.get(id(array))
        if found is None:
            self.spend(len(array))
            found = self.scalars[id(array)] = {
                _key(x) for x in array if not isinstance(x, (dict, list))
            }
        return found


def _key(scalar: Any) -> tuple[str, Any]:
    """A JSON scalar as containment compares it: by value within its JSON type (true is
    not 1; 1 is 1.0)."""
    if isinstance(scalar, bool):
        return "b", scalar
    if isinstance(scalar, (int, float)):
        return "n", scalar
    return ("s", scalar) if isinstance(scalar, str) else ("z", None)


def json_contains(value: Any, wanted: Any, steps: int = CONTAINS_STEPS) -> bool:
    """Whether JSON `value` contains `wanted` as PostgreSQL's jsonb `@>` reads it below the
    top level: objects by their keys, recursively; arrays when every wanted element is
    contained in some element; scalars by equal value and JSON type (true is not 1). False
    once the test has taken `steps` steps."""
    try:
        return _contains(value, wanted, _Search(steps))
    except _OverBudget:
        return False


def _contains(value: Any, wanted: Any, search: _Search) -> bool:
    kind = type(wanted)
    if kind is dict:
        if type(value) is not dict:
            return False
        search.spend(len(wanted))
        for k, w in wanted.items():
            if k not in value or not _contains(value[k], w, search):
                return False
        return True
    if kind is list:
        if type(value) is not list:
            return False
        search.spend(len(wanted))
        for w in wanted:
            if type(w) is dict or type(w) is list:
                if not _in_some(value, w, search):
                    return False
            elif _key(w) not in search.scalars_of(value):
                return False
        return True
    return type(value) is not dict and type(value) is not list and _same(value, wanted)


def _in_some(array: list[Any], wanted: Any, search: _Search) -> bool:
    """Whether some item of `array` contains the object or array `wanted`. A quick look
    passes most items by: at an object's first scalar, or whether a short array holds the
    first few scalars wanted (Python's `==` never tells equal JSON scalars apart)."""
    search.spend(len(array))
    kind = type(wanted)
    if kind is dict:
        probe = next(((k, v) for k, v in wanted.items() if type(v) not in (dict, list)), None)
        for x in array:
            if type(x) is not dict:
                continue
            if probe is not None and x.get(probe[0], _ABSENT) != probe[1]:
                continue
            if _contains(x, wanted, search):
                return True
        return False
    scalars = [v for v in wanted if type(v) not in (dict, list)][:_PROBED]
    for x in array:
        if type(x) is not list:
            continue
        if len(x) <= _PROBED and not all(v in x for v in scalars):
            continue
        if _contains(x, wanted, search):
            return True
    return False


_ABSENT = object()
_PROBED = 8  # the scalars a quick look at an array checks, in arrays of at most as many


def _same(value: Any, wanted: Any) -> bool:
    """Two JSON scalars are equal: equal values of one JSON type (Python has true == 1)."""
    if value != wanted:
        return False
    if type(value) is type(wanted):
        return True
    return type(value) is not bool and type(wanted) is not bool  # an int and a float
