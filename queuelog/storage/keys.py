"""Every SQL statement on `api_keys`."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Row

from queuelog.storage.dialect import KEYS_CHANNEL
from queuelog.storage.tables import api_keys
from queuelog.storage.tx import Tx

K = api_keys.c
_BY_HASH = sa.select(*K).where(K.secret_hash == sa.bindparam("h"))


def by_hash(tx: Tx, secret_hash: str) -> Row[Any] | None:
    return tx.conn.execute(_BY_HASH, {"h": secret_hash}).first()


def live_names(tx: Tx, names: Collection[str]) -> set[str]:
    """Which of `names` name a key not revoked."""
    query = sa.select(K.name).where(K.name.in_(sorted(names)), K.revoked_at.is_(None))
    return set(tx.conn.execute(query).scalars())


def insert(tx: Tx, values: Mapping[str, Any]) -> Row[Any] | None:
    """Insert a key; None when the name is taken."""
    exists = tx.conn.execute(sa.select(K.id).where(K.name == values["name"])).first()
    if exists is not None:
        return None
    return tx.conn.execute(api_keys.insert().values(values).returning(*K)).one()


def all_keys(tx: Tx) -> list[Row[Any]]:
    return list(tx.conn.execute(sa.select(*K).order_by(K.id)).all())


def count(tx: Tx) -> int:
    return int(tx.conn.execute(sa.select(sa.func.count()).select_from(api_keys)).scalar_one())


def revoke(tx: Tx, name: str, now: datetime) -> bool:
    """Revoke the named key; False when there is no such live key."""
    result = tx.conn.execute(
        api_keys.update().where(K.name == name, K.revoked_at.is_(None)).values(revoked_at=now)
    )
    if result.rowcount:
        tx.dialect.notify(tx.conn, KEYS_CHANNEL)
    return bool(result.rowcount)
