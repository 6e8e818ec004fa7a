"""Typed domain errors. Each carries the contract's UserErrorCode and, where it helps the
caller, the job as it now is (e.g. a cancelled job for the worker that still holds it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from queuelog.domain.codes import UserErrorCode

if TYPE_CHECKING:
    from queuelog.service.models import Job


class DomainError(Exception):
    """The request was refused by a rule of the queue."""

    code = UserErrorCode.VALIDATION_FAILED

    def __init__(
        self, message: str, field: Sequence[str] | None = None, job: Job | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = list(field) if field is not None else None
        self.job = job


class ValidationFailed(DomainError):
    code = UserErrorCode.VALIDATION_FAILED


class JobTypeNotAllowed(DomainError):
    code = UserErrorCode.JOB_TYPE_NOT_ALLOWED


class PayloadTooLarge(DomainError):
    code = UserErrorCode.PAYLOAD_TOO_LARGE


class PriorityNotAllowed(DomainError):
    code = UserErrorCode.PRIORITY_NOT_ALLOWED


class IdempotencyKeyReused(DomainError):
    code = UserErrorCode.IDEMPOTENCY_KEY_REUSED


class NotFound(DomainError):
    code = UserErrorCode.NOT_FOUND


class InvalidState(DomainError):
    code = UserErrorCode.INVALID_STATE


class NotJobOwner(DomainError):
    code = UserErrorCode.NOT_JOB_OWNER


class NameTaken(DomainError):
    code = UserErrorCode.NAME_TAKEN


class InvalidSchedule(DomainError):
    code = UserErrorCode.INVALID_SCHEDULE
