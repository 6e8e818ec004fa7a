"""A job filter as the API gives it, checked and turned into storage's `JobFilter`.

The schedule that enqueued a job is its producer (`service.models.producer_of`): a
`schedule` condition is a condition on the producer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from queuelog.service import errors, validation
from queuelog.service.models import Status, producer_of
from queuelog.service.throughput import aware
from queuelog.storage.filters import EVERY_JOB, JobFilter

__all__ = ["EVERY_JOB", "FILTER_VALUES_MAX", "FilterInput", "JobFilter", "job_filter"]

# Values one list of a filter may hold: a filter is a question, not a bulk import.
FILTER_VALUES_MAX = 1_000
# The bounds of a payloadContains object: it is compared with every scanned payload, and
# the work of one comparison grows with the filter's arrays and the values in them.
CONTAINS_MAX_BYTES = 4_096
CONTAINS_MAX_DEPTH = 8  # levels of objects and arrays, the filter itself the first
CONTAINS_MAX_ITEMS = 64  # items in one array
CONTAINS_MAX_VALUES = 256  # values below the filter's top, at any depth
NOTHING = JobFilter(ids=())


@dataclass(frozen=True, slots=True)
class FilterInput:
    """The API's JobFilter, field by field (ids as the API shows them)."""

    ids: Sequence[str] | None = None
    statuses: Sequence[Status] | None = None
    types: Sequence[str] | None = None
    producer: str | None = None
    worker_id: str | None = None
    idempotency_key: str | None = None
    concurrency_key: str | None = None
    schedule: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    payload_contains: Any = None


def _bounded(values: Sequence[Any] | None, name: str, field: list[str]) -> None:
    if values is not None and len(values) > FILTER_VALUES_MAX:
        raise errors.ValidationFailed(
            f"{name} may list at most {FILTER_VALUES_MAX} values", [*field, name]
        )


def _shape_fits(value: Any) -> bool:
    """Whether a payloadContains value keeps within the depth, array and value bounds (a
    walk that stops at the first bound passed, whatever the value's size)."""
    values = 0
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            items = list(node.values())
        elif isinstance(node, list):
            items = node
            if len(items) > CONTAINS_MAX_ITEMS:
                return False
        else:
            continue
        values += len(items)
        if depth > CONTAINS_MAX_DEPTH or values > CONTAINS_MAX_VALUES:
            return False
        stack.extend((item, depth + 1) for item in items)
    return True


def _job_id(value: str) -> int | None:
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 18 else None


def job_filter(given: FilterInput, field: Sequence[str] = ("filter",)) -> JobFilter:
    """Storage's filter for `given`, or ValidationFailed naming the field it refuses. An id
    that cannot be a job's, or a text no job can hold, matches nothing."""
    at = list(field)
    producer = given.producer
    if given.schedule is not None:
        scheduled = producer_of(given.schedule)
        if producer is not None and producer != scheduled:
            return NOTHING  # a schedule's jobs have its producer, and no other
        producer = scheduled
    _bounded(given.ids, "ids", at)
    _bounded(given.statuses, "statuses", at)
    _bounded(given.types, "types", at)
    contains = None
    if given.payload_contains is not None:
        where = [*at, "payloadContains"]
        if not _shape_fits(given.payload_contains):
            raise errors.ValidationFailed(
                f"payloadContains may nest {CONTAINS_MAX_DEPTH} levels deep, with at most"
                f" {CONTAINS_MAX_ITEMS} items in an array and {CONTAINS_MAX_VALUES} values"
                " in all",
                where,
            )
        try:
            contains = validation.json_object(
                given.payload_contains, CONTAINS_MAX_BYTES, where, "payloadContains"
            )
        except errors.DomainError as exc:  # too large is a bad filter, not a refused job
            raise errors.ValidationFailed(exc.message, where) from None
    texts = [producer, given.worker_id, given.idempotency_key, given.concurrency_key]
    texts += given.types or ()
    if any(t is not None and not t.isprintable() for t in texts):
        return NOTHING  # stored texts are printable (and PostgreSQL refuses NUL characters)
    ids = None if given.ids is None else tuple(i for i in map(_job_id, given.ids) if i is not None)
    return JobFilter(
        ids=ids,
        statuses=None if given.statuses is None else tuple(s.value for s in given.statuses),
        types=None if given.types is None else tuple(given.types),
        producer=producer,
        worker_id=given.worker_id,
        idempotency_key=given.idempotency_key,
        concurrency_key=given.concurrency_key,
        created_after=None if given.created_after is None else aware(given.created_after),
        created_before=None if given.created_before is None else aware(given.created_before),
        payload_contains=contains,
    )
