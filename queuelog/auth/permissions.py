"""Strawberry permission classes: who may call which field."""

from __future__ import annotations

from typing import Any, ClassVar

from graphql import GraphQLError
from strawberry.permission import BasePermission

from queuelog.auth.ratelimit import RateLimited
from queuelog.domain.codes import ErrorCode
from queuelog.domain.roles import Capability, Role, may, who_may

UNAUTHENTICATED_MESSAGE = "authentication required: send 'Authorization: Bearer <api key>'"


def unauthenticated(message: str = UNAUTHENTICATED_MESSAGE) -> GraphQLError:
    return GraphQLError(message, extensions={"code": ErrorCode.UNAUTHENTICATED})


def forbidden(message: str) -> GraphQLError:
    return GraphQLError(message, extensions={"code": ErrorCode.FORBIDDEN})


def rate_limited(exc: RateLimited) -> GraphQLError:
    return GraphQLError(
        str(exc),
        extensions={"code": ErrorCode.RATE_LIMITED, "retryAfter": round(exc.retry_after, 3)},
    )


class Authenticated(BasePermission):
    """Any live key; subclasses name the capability their fields need (`domain.roles`)."""

    capability: ClassVar[Capability] = Capability.ANY
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
        if not may(actor.role, self.capability):
            raise forbidden(refusal(actor.role, self.capability))
        return True


def refusal(role: Role, capability: Capability) -> str:
    """What a key of `role` is told when it lacks `capability`."""
    return f"this needs {who_may(capability)}; yours is {who_may_be(role)}"


def who_may_be(role: Role) -> str:
    return f"{'an' if role.value[:1] in 'aeiou' else 'a'} {role.value} key"


class MayEnqueue(Authenticated):
    capability = Capability.ENQUEUE


class MayWork(Authenticated):
    capability = Capability.WORK


class MayManage(Authenticated):
    capability = Capability.MANAGE


class MayReadAll(Authenticated):
    capability = Capability.READ_ALL
