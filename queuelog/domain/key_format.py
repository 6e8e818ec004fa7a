"""The shape of an API key's secret, known without the database: how one is made, and
whether a text could be one. `auth.keys` uses it to refuse garbage for free, and the
settings use it to check `QUEUELOG_ADMIN_KEY`.

A key reads `qlk_` + 43 random base62 characters (256 bits) + a 6-character base62 CRC32 of
them. Keys of the earlier format (`ql_` and then any random text) are looked up by hash."""

from __future__ import annotations

import hmac
import secrets
import string
import zlib

PREFIX = "qlk_"
LEGACY_PREFIX = "ql_"
SECRET_MAX = 256
_BASE62 = string.digits + string.ascii_letters
_RANDOM_CHARS = 43  # 62**43 > 2**256
_CHECKSUM_CHARS = 6  # 62**6 > 2**32
_RANDOM = frozenset(_BASE62)


def _base62(n: int, width: int) -> str:
    chars = []
    for _ in range(width):
        n, digit = divmod(n, 62)
        chars.append(_BASE62[digit])
    return "".join(reversed(chars))


def _checksum(body: str) -> str:
    return _base62(zlib.crc32(body.encode()), _CHECKSUM_CHARS)


def generate_secret() -> str:
    body = "".join(secrets.choice(_BASE62) for _ in range(_RANDOM_CHARS))
    return PREFIX + body + _checksum(body)


def well_formed(secret: str) -> bool:
    """Whether `secret` could be a key: a current one with a valid checksum, or one in the
    legacy format. Decided without the database, so garbage costs nothing to refuse."""
    if secret.startswith(PREFIX):
        rest = secret[len(PREFIX) :]
        body, check = rest[:_RANDOM_CHARS], rest[_RANDOM_CHARS:]
        return (
            len(body) == _RANDOM_CHARS
            and _RANDOM.issuperset(body)
            and hmac.compare_digest(check, _checksum(body))
        )
    return secret.startswith(LEGACY_PREFIX) and len(secret) <= SECRET_MAX
