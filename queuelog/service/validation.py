"""Checks on what callers send. Each failure names the input field at fault."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import orjson

from queuelog.config import JobTypeConfig
from queuelog.domain.lifecycle import ENQUEUE
from queuelog.service import errors
from queuelog.service.models import Actor, EnqueueRequest, Role

MAX_RETRIES_LIMIT = 25
KEY_MAX_LEN = 255
RUN_AT_GRACE = timedelta(hours=1)
# Levels of objects and arrays a payload or result may nest: well inside what the JSON
# encoder and every response envelope around a payload can hold.
JSON_MAX_DEPTH = 100
CLAIM_TYPES_MAX = 100  # distinct types one claim may ask for
INT_MIN, INT_MAX = -(2**63), 2**64 - 1  # the integers JSON text here carries exactly


def job_type(
    actor: Actor, name: str, configured: dict[str, JobTypeConfig], field: Sequence[str]
) -> JobTypeConfig:
    cfg = configured.get(name)
    if cfg is None:
        raise errors.JobTypeNotAllowed(
            f"job type {name!r} is not configured: the server takes the types of its "
            "QUEUELOG_JOB_TYPES setting (or job_types in its QUEUELOG_CONFIG TOML file)",
            field,
        )
    if not actor.may_use_type(name):
        raise errors.JobTypeNotAllowed(f"this key may not use job type {name!r}", field)
    return cfg


def claim_types(types: Sequence[str] | None, field: Sequence[str]) -> list[str] | None:
    """The distinct types a claim asks for, in the order given (None: every type it may
    use): a list as long as a request can carry costs no more than its distinct entries."""
    if types is None:
        return None
    distinct = list(dict.fromkeys(types))
    if len(distinct) > CLAIM_TYPES_MAX:
        raise errors.ValidationFailed(
            f"give at most {CLAIM_TYPES_MAX} distinct types, not {len(distinct)}", field
        )
    return distinct


def serialize(value: Any, limit: int, field: Sequence[str], what: str) -> str:
    """JSON text of `value`, refusing what exceeds `limit` bytes or what JSON text would not
    carry back exactly (`check_json`)."""
    check_json(value, field, what)
    try:
        data = orjson.dumps(value)
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise errors.ValidationFailed(f"{what} is not serializable JSON: {exc}", field) from None
    if len(data) > limit:
        raise errors.PayloadTooLarge(
            f"{what} is {len(data)} bytes serialized; the limit is {limit} bytes", field
        )
    return data.decode()


def json_object(value: Any, limit: int, field: Sequence[str], what: str) -> str:
    """JSON text of a payload (or a payload filter): an object (None reads as an empty one),
    within `limit` bytes, with no NUL character in any key or string, which PostgreSQL's
    jsonb cannot hold (refused on SQLite too, so both keep the same payloads)."""
    value = {} if value is None else value
    if not isinstance(value, dict):
        raise errors.ValidationFailed(f"{what} must be a JSON object", field)
    text = serialize(value, limit, field, what)
    if "\\u0000" in text and _holds_nul(value):  # the escape is rare: only then look closer
        raise errors.ValidationFailed(f"{what} must not contain NUL (\\u0000) characters", field)
    return text


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_nul(v) for v in value)
    return False


def check_json(value: Any, field: Sequence[str], what: str) -> None:
    """Refuse a payload or result that would not come back as it was sent: nested deeper
    than JSON_MAX_DEPTH, or holding a number that JSON text cannot carry exactly (an
    integer beyond 64 bits, an infinity or NaN, which would be stored as a float or null).
    One depth for every path: what is accepted here is always stored, hashed and served."""
    kind = type(value)
    if kind is not dict and kind is not list:
        _check_scalar(value, field, what)
        return
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if depth > JSON_MAX_DEPTH:
            raise errors.ValidationFailed(
                f"{what} nests objects and arrays deeper than {JSON_MAX_DEPTH} levels", field
            )
        for child in item.values() if type(item) is dict else item:
            kind = type(child)
            if kind is dict or kind is list:
                pending.append((child, depth + 1))
            elif kind is int or kind is float:
                _check_scalar(child, field, what)


def _check_scalar(value: Any, field: Sequence[str], what: str) -> None:
    if type(value) is int and not INT_MIN <= value <= INT_MAX:
        raise errors.ValidationFailed(
            f"{what} holds an integer beyond 64 bits, which it would not keep exactly; "
            "send it as a string",
            field,
        )
    if type(value) is float and not math.isfinite(value):
        raise errors.ValidationFailed(f"{what} holds {value}, which JSON cannot hold", field)


def filter_text(value: str | None, field: Sequence[str]) -> str | None:
    """A string compared in SQL as it is (a filter such as a job type): the one rule for
    them all. NUL is refused: PostgreSQL cannot take it, and no stored text holds it."""
    if value is not None and "\x00" in value:
        raise errors.ValidationFailed(f"{field[-1]} must not contain NUL characters", field)
    return value


def idempotency_key(key: str, field: Sequence[str], name: str = "idempotencyKey") -> str:
    """A key a producer gives (idempotency, concurrency): 1 to 255 printable characters."""
    if not 1 <= len(key) <= KEY_MAX_LEN:
        raise errors.ValidationFailed(f"{name} must be 1 to {KEY_MAX_LEN} characters", field)
    if not key.isprintable():
        raise errors.ValidationFailed(f"{name} must be printable characters", field)
    return key


def run_at(
    req: EnqueueRequest, now: datetime, horizon: timedelta, prefix: Sequence[str]
) -> datetime:
    """When the job becomes claimable: now, a delay from now, or a time not in the far past
    (a recent past time counts as now) and not beyond the horizon."""
    if req.run_at is not None and req.delay_seconds is not None:
        raise errors.ValidationFailed(
            "give at most one of runAt and delaySeconds", [*prefix, "delaySeconds"]
        )
    if req.delay_seconds is not None:
        if not 0 <= req.delay_seconds <= horizon.total_seconds():
            raise errors.ValidationFailed(
                f"delaySeconds must be between 0 and {int(horizon.total_seconds())}",
                [*prefix, "delaySeconds"],
            )
        return now + timedelta(seconds=req.delay_seconds)
    if req.run_at is not None:
        when = req.run_at
        if when.tzinfo is None:
            raise errors.ValidationFailed("runAt needs a UTC offset", [*prefix, "runAt"])
        if when < now - RUN_AT_GRACE:
            raise errors.ValidationFailed("runAt is in the past", [*prefix, "runAt"])
        if when > now + horizon:
            raise errors.ValidationFailed(
                f"runAt is more than {horizon.days} days ahead", [*prefix, "runAt"]
            )
        return max(when, now)
    return now


def request_hash(req: EnqueueRequest) -> str:
    """What makes two enqueues with one idempotency key 'the same request': a digest of
    its fields as one JSON object with sorted keys. The object is written out around the
    payload's own text, so hashing nests the payload no deeper than storing it does."""
    fields = {
        "delay_seconds": req.delay_seconds,
        "max_retries": req.max_retries,
        "priority": int(req.priority),
        "run_at": None if req.run_at is None else req.run_at.isoformat(),
        "type": req.type,
    }
    head_fields = {k: fields[k] for k in ("delay_seconds", "max_retries")}
    if req.concurrency_key is not None:  # absent, the digest is as it was before keys
        head_fields = {"concurrency_key": req.concurrency_key, **head_fields}
    head = orjson.dumps(head_fields)
    tail = orjson.dumps({k: fields[k] for k in ("priority", "run_at", "type")})
    payload = orjson.dumps(req.payload, option=orjson.OPT_SORT_KEYS)
    canonical = head[:-1] + b',"payload":' + payload + b"," + tail[1:]
    return hashlib.sha256(canonical).hexdigest()


def enqueue(
    actor: Actor,
    req: EnqueueRequest,
    *,
    now: datetime,
    configured: dict[str, JobTypeConfig],
    payload_limit: int,
    horizon: timedelta,
    prefix: Sequence[str],
) -> dict[str, Any]:
    """The `jobs` row for an enqueue request (the columns of `ENQUEUE`; without an
    idempotency key, none of its columns), or the DomainError that refuses it."""
    if req.type not in configured or not actor.may_use_type(req.type):
        job_type(actor, req.type, configured, [*prefix, "type"])  # raises the precise error
    text = json_object(req.payload, payload_limit, [*prefix, "payload"], "payload")
    admin = actor.role is Role.ADMIN
    if not admin and req.priority > actor.max_priority:
        raise errors.PriorityNotAllowed(
            f"priority {req.priority.name} is above this key's maximum {actor.max_priority.name}",
            [*prefix, "priority"],
        )
    if not 0 <= req.max_retries <= MAX_RETRIES_LIMIT:
        raise errors.ValidationFailed(
            f"maxRetries must be between 0 and {MAX_RETRIES_LIMIT}", [*prefix, "maxRetries"]
        )
    key = req.idempotency_key
    if key is not None:
        idempotency_key(key, [*prefix, "idempotencyKey"])
    concurrency = req.concurrency_key
    if concurrency is not None:
        idempotency_key(concurrency, [*prefix, "concurrencyKey"], "concurrencyKey")
    when = run_at(req, now, horizon, prefix)
    row = {
        "type": req.type,
        "payload": text,
        "priority": int(req.priority),
        "status": ENQUEUE.target.value,
        "retry_count": 0,
        "max_retries": req.max_retries,
        "producer": actor.name,
        "run_at": when,
        "created_at": now,
        "updated_at": now,
        # Always given: rows inserted together take the first row's columns.
        "concurrency_key": concurrency,
    }
    if key is not None:  # left out, they are NULL
        row["idempotency_key"] = key
        row["request_hash"] = request_hash(req)
    return row


def bounded(value: int, low: int, high: int, name: str, field: Sequence[str]) -> int:
    if not low <= value <= high:
        raise errors.ValidationFailed(f"{name} must be between {low} and {high}", field)
    return value


def flow_limits(
    max_running: int | None,
    max_running_per_key: int | None,
    max_starts_per_second: float | None,
    field: Sequence[str],
) -> None:
    """A job type's limits: counts of 1 or more, a rate above 0 (and finite); None: none."""
    for name, count in (("maxRunning", max_running), ("maxRunningPerKey", max_running_per_key)):
        if count is not None and count < 1:
            raise errors.ValidationFailed(f"{name} must be 1 or more", [*field, name])
    rate = max_starts_per_second
    if rate is not None and not (math.isfinite(rate) and rate > 0):
        raise errors.ValidationFailed(
            "maxStartsPerSecond must be greater than 0", [*field, "maxStartsPerSecond"]
        )
