"""The typed per-request context, and the top-level errors resolvers raise."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from graphql import GraphQLError
from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from queuelog.auth.keys import KeyStore
from queuelog.auth.permissions import unauthenticated
from queuelog.auth.ratelimit import TokenBuckets
from queuelog.domain.codes import ErrorCode
from queuelog.events.feed import EventFeed
from queuelog.events.sessions import Session
from queuelog.service.errors import ValidationFailed
from queuelog.service.job_types import JobTypeService
from queuelog.service.jobs import JobService
from queuelog.service.models import Actor
from queuelog.service.schedules import ScheduleService


@contextmanager
def refusing_bad_input() -> Iterator[None]:
    """A service's ValidationFailed (a `first` out of bounds, a malformed cursor) as
    BAD_USER_INPUT, for the queries, whose answers have no `userErrors`."""
    try:
        yield
    except ValidationFailed as exc:
        raise bad_input(exc.message, exc.field) from None


def bad_input(message: str, field: list[str] | None = None) -> GraphQLError:
    extensions: dict[str, Any] = {"code": ErrorCode.BAD_USER_INPUT}
    if field:
        extensions["field"] = field
    return GraphQLError(message, extensions=extensions)


@dataclass(slots=True)
class Context:
    request: Request | WebSocket
    response: Response | None
    service: JobService
    keys: KeyStore
    feed: EventFeed
    actor: Actor | None = None
    connection_params: dict[str, Any] | None = None
    ws_rate_limit: TokenBuckets | None = None  # set on WebSocket connections
    session: Session | None = None  # WebSocket connections: the key's live state
    schedules_service: ScheduleService | None = None
    job_types_service: JobTypeService | None = None

    @property
    def schedules(self) -> ScheduleService:
        assert self.schedules_service is not None, "the server sets it"
        return self.schedules_service

    @property
    def job_types(self) -> JobTypeService:
        assert self.job_types_service is not None, "the server sets it"
        return self.job_types_service

    def require_actor(self) -> Actor:
        if self.actor is None:
            raise unauthenticated()
        return self.actor
