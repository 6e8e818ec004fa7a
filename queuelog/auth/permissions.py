"""Strawberry permission classes: who may call which field."""

from __future__ import annotations

from typing import Any, ClassVar

from graphql import GraphQLError
from strawberry.permission import BasePermission

from queuelog.auth.ratelimit import RateLimited
from queuelog.service.models import READERS, Role

UNAUTHENTICATED_MESSAGE = "authentication required: send 'Authorization: Bearer <api key>'"


def unauthenticated(message: str = UNAUTHENTICATED_MESSAGE) -> GraphQLError:
    return GraphQLError(message, extensions={"code": "UNAUTHENTICATED"})


def forbidden(message: str) -> GraphQLError:
    return GraphQLError(message, extensions={"code": "FORBIDDEN"})


def rate_limited(exc: RateLimited) -> GraphQLError:
    return GraphQLError(
        str(exc), extensions={"code": "RATE_LIMITED", "retryAfter": round(exc.retry_after, 3)}
    )


class Authenticated(BasePermission):
    """Any live key; subclasses narrow the roles (admins may always)."""

    roles: ClassVar[tuple[Role, ...]] = ()
    message = "authentication required"

    def has_permission(self, source: Any, info: Any, **kwargs: Any) -> bool:
        actor = info.context.actor
        if actor is None:
            raise unauthenticated()
        # Over HTTP the middleware charged the request; a WebSocket connection's operations
        # spend the same per-key bucket here, one token per root field.
        if (buckets := info.context.ws_rate_limit) is not None:
            try:
                buckets.take(actor.name)
            except RateLimited as exc:
                raise rate_limited(exc) from None
        if self.roles and actor.role is not Role.ADMIN and actor.role not in self.roles:
            allowed = dict.fromkeys((*self.roles, Role.ADMIN))  # each role once, in order
            wanted = " or ".join(r.value for r in allowed)
            raise forbidden(
                f"this needs {_article(wanted)} {wanted} key; "
                f"yours is {_article(actor.role.value)} {actor.role.value} key"
            )
        return True


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


class ProducerOrAdmin(Authenticated):
    roles = (Role.PRODUCER,)


class WorkerOrAdmin(Authenticated):
    roles = (Role.WORKER,)


class AdminOnly(Authenticated):
    roles = (Role.ADMIN,)


class Readers(Authenticated):
    """Admins, and viewers where that role exists: who may read everything."""

    roles = tuple(READERS)
