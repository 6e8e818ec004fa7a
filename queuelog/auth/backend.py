"""Starlette authentication: `Authorization: Bearer <secret>` becomes a Principal."""

from __future__ import annotations

from starlette.authentication import (
    AuthCredentials,
    AuthenticationBackend,
    AuthenticationError,
    BaseUser,
)
from starlette.requests import HTTPConnection

from queuelog.auth.keys import KeyStore, well_formed
from queuelog.auth.ratelimit import RateLimited, TokenBuckets
from queuelog.service.models import Actor, ApiKey


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


class TooManyFailures(AuthenticationError):
    """This client address failed to authenticate too often; it must wait."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(
            f"too many failed attempts to authenticate from this address; "
            f"retry in {max(1, round(retry_after))} s"
        )
        self.retry_after = retry_after


def client_address(conn: HTTPConnection) -> str:
    return conn.client.host if conn.client else "unknown"


class ApiKeyBackend(AuthenticationBackend):
    """Anonymous without a header (introspection and `__typename` still answer); a bad key
    is refused outright, so a typo never silently runs as nobody.

    A live key is never refused here, whatever its address did before. Each failed attempt
    spends a token of the client address's bucket, and an address with none left gets
    TooManyFailures instead of InvalidKey. Guessing stays infeasible because keys carry 256
    random bits, and cheap to refuse because a key that fails its checksum is refused
    without a database lookup (`keys.well_formed`)."""

    def __init__(self, keys: KeyStore, failures: TokenBuckets | None = None) -> None:
        self.keys = keys
        self.failures = failures or TokenBuckets(0, 1)

    async def verify(self, token: str, address: str) -> ApiKey:
        """The live key `token` is; raises InvalidKey or TooManyFailures otherwise."""
        if not well_formed(token):
            self._failed(address)
            raise InvalidKey("not a queuelog API key: its format or checksum is wrong")
        key = await self.keys.verify(token)
        if key is None:
            self._failed(address)
            raise InvalidKey("invalid or revoked API key")
        return key

    def _failed(self, address: str) -> None:
        try:
            self.failures.take(address)
        except RateLimited as exc:
            raise TooManyFailures(exc.retry_after) from None

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        if conn.scope["type"] == "websocket":
            return None  # the key travels in connection_init instead
        token = bearer(conn.headers.get("authorization"))
        if token is None:
            return None
        key = await self.verify(token, client_address(conn))
        return AuthCredentials(["authenticated", key.role.value]), Principal(key.actor())
