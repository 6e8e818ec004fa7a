"""Starlette authentication: `Authorization: Bearer <secret>` becomes a Principal."""

from __future__ import annotations

from starlette.authentication import (
    AuthCredentials,
    AuthenticationBackend,
    AuthenticationError,
    BaseUser,
)
from starlette.requests import HTTPConnection

from queuelog.auth.keys import KeyStore
from queuelog.service.models import Actor


class Principal(BaseUser):
    def __init__(self, actor: Actor) -> None:
        self.actor = actor

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def display_name(self) -> str:
        return self.actor.name

    @property
    def identity(self) -> str:
        return self.actor.name


class InvalidKey(AuthenticationError):
    """A key was presented and it is not a live key."""


def bearer(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer …` value (None when there is none)."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise InvalidKey("the Authorization header must be 'Bearer <api key>'")
    return token.strip()


class ApiKeyBackend(AuthenticationBackend):
    """Anonymous without a header (introspection and `__typename` still answer); a bad key
    is refused outright, so a typo never silently runs as nobody."""

    def __init__(self, keys: KeyStore) -> None:
        self.keys = keys

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        if conn.scope["type"] == "websocket":
            return None  # the key travels in connection_init instead
        token = bearer(conn.headers.get("authorization"))
        if token is None:
            return None
        key = await self.keys.verify(token)
        if key is None:
            raise InvalidKey("invalid or revoked API key")
        return AuthCredentials(["authenticated", key.role.value]), Principal(key.actor())
