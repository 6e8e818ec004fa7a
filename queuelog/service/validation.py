"""Checks on what callers send. Each failure names the input field at fault."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import orjson

from queuelog.config import JobTypeConfig
from queuelog.lifecycle import ENQUEUE
from queuelog.service import errors
from queuelog.service.models import Actor, EnqueueRequest, Role

MAX_RETRIES_LIMIT = 25
KEY_MAX_LEN = 255
RUN_AT_GRACE = timedelta(hours=1)


def job_type(
    actor: Actor, name: str, configured: dict[str, JobTypeConfig], field: Sequence[str]
) -> JobTypeConfig:
    cfg = configured.get(name)
    if cfg is None:
        raise errors.JobTypeNotAllowed(f"job type {name!r} is not configured", field)
    if not actor.may_use_type(name):
        raise errors.JobTypeNotAllowed(f"this key may not use job type {name!r}", field)
    return cfg


def serialize(value: Any, limit: int, field: Sequence[str], what: str) -> str:
    """JSON text of `value`, refusing what JSON cannot hold or what exceeds `limit` bytes."""
    try:
        data = orjson.dumps(value)
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise errors.ValidationFailed(f"{what} is not serializable JSON: {exc}", field) from None
    if len(data) > limit:
        raise errors.PayloadTooLarge(
            f"{what} is {len(data)} bytes serialized; the limit is {limit} bytes", field
        )
    return data.decode()


def idempotency_key(key: str, field: Sequence[str]) -> str:
    if not 1 <= len(key) <= KEY_MAX_LEN:
        raise errors.ValidationFailed(
            f"idempotencyKey must be 1 to {KEY_MAX_LEN} characters", field
        )
    if not key.isprintable():
        raise errors.ValidationFailed("idempotencyKey must be printable characters", field)
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
    """What makes two enqueues with one idempotency key 'the same request'."""
    canonical = orjson.dumps(
        {
            "type": req.type,
            "payload": req.payload,
            "priority": int(req.priority),
            "max_retries": req.max_retries,
            "run_at": None if req.run_at is None else req.run_at.isoformat(),
            "delay_seconds": req.delay_seconds,
        },
        option=orjson.OPT_SORT_KEYS,
    )
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
    payload = {} if req.payload is None else req.payload
    if not isinstance(payload, dict):
        raise errors.ValidationFailed("payload must be a JSON object", [*prefix, "payload"])
    text = serialize(payload, payload_limit, [*prefix, "payload"], "payload")
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
    }
    if key is not None:  # left out, they are NULL
        row["idempotency_key"] = key
        row["request_hash"] = request_hash(req)
    return row


def bounded(value: int, low: int, high: int, name: str, field: Sequence[str]) -> int:
    if not low <= value <= high:
        raise errors.ValidationFailed(f"{name} must be between {low} and {high}", field)
    return value
