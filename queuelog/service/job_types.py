"""Job types as the API shows them, their pause and flow limits, and the claim that obeys them.

A type's pause and limits are a `job_types` row (`storage.job_types`), read by every claim
in its own transaction: a change is seen by every replica at its next claim. The TOML
file's `[types.NAME]` values seed a type's row on start only where it has none, so what
the API set since survives a restart. Which role may change them is `auth.permissions`'
(admins); who sees which type is the actor's allowed types.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from queuelog.config import JobTypeConfig
from queuelog.service import validation
from queuelog.service.models import Actor, Priority, Role
from queuelog.service.visibility import scope
from queuelog.singleflight import SingleFlight
from queuelog.storage import job_types as types_sql
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database
from queuelog.storage.driver import JobRow
from queuelog.storage.job_types import TypeState
from queuelog.storage.scope import Scope
from queuelog.storage.tx import Tx

_ADMIN = Actor("admin", Role.ADMIN, max_priority=Priority.CRITICAL)
_PRIORITIES = tuple(int(p) for p in Priority)
TOKEN_WAIT_MIN = 0.01  # a waiting claim of a fast-rate type tries again at most this often
HINT_SECONDS = 2.0  # a `LimitedHint` read is trusted this long when no change was heard


@dataclass(frozen=True, slots=True)
class Limits:
    max_running: int | None = None
    max_running_per_key: int | None = None
    max_starts_per_second: float | None = None


@dataclass(frozen=True, slots=True)
class WaitHints:
    """What a claim about to wait should also wake for: a job of a `limited` type leaving
    RUNNING (it may free a place), and a rate-limited type's next token, `token_in`
    seconds from now (None: no such type)."""

    limited: frozenset[str] = frozenset()
    token_in: float | None = None


@dataclass(frozen=True, slots=True)
class JobTypeView:
    """One job type as a viewer sees it."""

    name: str
    stats: dict[str, int]
    paused: bool
    limits: Limits
    oldest_pending_at: datetime | None


class LimitedHint:
    """Which job types this process last read as limited and not paused: a claim that
    comes back short tries the limited claim (a row lock and more) only for those.

    A stale hint breaks no limit: the one-statement claim skips every paused or limited
    type itself, and the limited claim locks a type's row only if it is limited and not
    paused. A type wrongly thought unlimited is only left unclaimed until the next read:
    after every change of a pause or limits made here or heard of (NOTIFY from another
    replica: `JobTypeService.changed`), and at the latest HINT_SECONDS after the last."""

    def __init__(self, db: Database, names: Sequence[str]) -> None:
        self.db = db
        self.names = list(names)
        self._limited: frozenset[str] = frozenset()
        self._read_at = -math.inf
        self._changes = 0  # changes heard of: a read begun before the last one is stale
        self._reads: SingleFlight[None, None] = SingleFlight()

    @property
    def changes(self) -> int:
        """How many changes of a pause or limits this process has heard of."""
        return self._changes

    def forget(self) -> None:
        """A type's pause or limits changed: read them again before the next claim."""
        self._changes += 1
        self._read_at = -math.inf

    def fresh(self) -> frozenset[str] | None:
        """The types last read as limited, or None when that read is too old or a change
        was heard since."""
        if time.monotonic() - self._read_at < HINT_SECONDS:
            return self._limited
        return None

    async def read(self) -> None:
        """Read them anew unless `fresh` (concurrent reads share one)."""
        if self.fresh() is None:
            await self._reads.run(None, self._changes, self._read)

    async def _read(self) -> None:
        changes, at = self._changes, time.monotonic()
        found = await self.db.read(types_sql.states, self.names)
        if changes == self._changes:  # no change was heard meanwhile: keep it
            self._limited = frozenset(n for n, s in found.items() if s.limited and not s.paused)
            self._read_at = at


def claim(
    tx: Tx,
    *,
    worker: str,
    now: datetime,
    types: Sequence[str],
    limit: int,
    lease_until: Mapping[str, datetime],
    limited_hint: Collection[str] | None = None,
) -> list[JobRow]:
    """Claim up to `limit` jobs of `types`. The one-statement claim takes jobs of the types
    neither paused nor limited (it reads their job_types rows itself); only when it comes
    back short is each limited type, in name order (their rows are locked in one order),
    claimed by its limited claim. A claim of several types may so
    take a job of a limited type after a less urgent one of another. `limited_hint`
    (`LimitedHint`) names the types that may be limited; None: any may be."""
    rows = jobs_sql.claim(
        tx, worker=worker, now=now, types=types, limit=limit, lease_until=lease_until
    )
    if len(rows) >= limit:
        return rows
    if limited_hint is not None:  # the limited claim checks the row again as it locks it
        limited = sorted(t for t in set(types) if t in limited_hint)
    elif len(types) == 1:  # its limited claim finds out for itself
        limited = list(types)
    else:  # several: lock only the rows of those that are limited
        found = types_sql.states(tx, types)
        limited = sorted(t for t, s in found.items() if s.limited and not s.paused)
    for name in limited:
        if len(rows) >= limit:
            break
        rows += types_sql.claim_limited(
            tx,
            worker=worker,
            now=now,
            name=name,
            limit=limit - len(rows),
            lease_until=lease_until[name],
        )
    if limited:
        rows.sort(key=lambda r: (-r.priority, r.run_at, r.id))
    return rows


def next_token_in(states: Mapping[str, TypeState], now: datetime) -> float | None:
    """Seconds until the soonest rate-limited type among `states` holds a token again."""
    waits = [
        w
        for s in states.values()
        if not s.paused and (w := s.next_token_in(now)) is not None and w > 0
    ]
    return max(TOKEN_WAIT_MIN, min(waits)) if waits else None


def _seed_row(cfg: JobTypeConfig, now: datetime) -> dict[str, Any]:
    return {
        "name": cfg.name,
        "paused": bool(cfg.paused),
        "max_running": cfg.max_running,
        "max_running_per_key": cfg.max_running_per_key,
        "max_starts_per_second": cfg.max_starts_per_second,
        "tokens": 0.0,
        "tokens_at": None,
        "updated_at": now,
    }


class Jobs(Protocol):
    """What the job types need of the job service that owns them."""

    db: Database
    types: dict[str, JobTypeConfig]
    clock: Callable[[], datetime]
    limited_hint: LimitedHint


class JobTypeService:
    """Pause, resume, limits and the `jobTypes` list, over the job service's database."""

    def __init__(self, jobs: Jobs) -> None:
        self.jobs = jobs
        self.db = jobs.db
        # The wake-ups of this process's waiting claims (`events.claims`).
        self._waiting: set[Callable[[], None]] = set()

    async def seed(self) -> None:
        """Give each type the TOML file limits or pauses a row, where it has none yet."""
        now = self.jobs.clock()
        rows = [_seed_row(c, now) for c in self.jobs.types.values() if c.seeds_flow]
        if rows:
            await self.db.write(types_sql.seed, rows)
            self.jobs.limited_hint.forget()

    async def visible(self, actor: Actor) -> list[JobTypeView]:
        """Every configured type `actor` may use, with its counts and its oldest due pending
        job over the jobs it may see."""
        names = [t for t in self.jobs.types if actor.may_use_type(t)]
        return await self.db.read(self._read, scope(actor), names)

    async def get(self, actor: Actor, name: str) -> JobTypeView:
        (found,) = await self.db.read(self._read, scope(actor), [name])
        return found

    def _read(self, tx: Tx, within: Scope, names: list[str]) -> list[JobTypeView]:
        found = types_sql.states(tx, names)
        stats = types_sql.stats_by_type(tx, within, names)
        now = self.jobs.clock()
        oldest = types_sql.oldest_pending(tx, within, names, _PRIORITIES, now)
        return [self._view(n, found.get(n), stats[n], oldest.get(n)) for n in names]

    @staticmethod
    def _view(
        name: str, state: TypeState | None, stats: dict[str, int], oldest: datetime | None
    ) -> JobTypeView:
        s = state or TypeState(name)
        return JobTypeView(
            name=name,
            stats=stats,
            paused=s.paused,
            limits=Limits(s.max_running, s.max_running_per_key, s.max_starts_per_second),
            oldest_pending_at=oldest,
        )

    async def pause(self, actor: Actor, name: str) -> JobTypeView:
        return await self._change(actor, name, {"paused": True})

    async def resume(self, actor: Actor, name: str) -> JobTypeView:
        return await self._change(actor, name, {"paused": False})

    async def set_limits(self, actor: Actor, name: str, limits: Limits) -> JobTypeView:
        """Replace the type's three limits (None removes one). A new rate starts with a
        full bucket."""
        validation.flow_limits(
            limits.max_running, limits.max_running_per_key, limits.max_starts_per_second, ["limits"]
        )
        values = {
            "max_running": limits.max_running,
            "max_running_per_key": limits.max_running_per_key,
            "max_starts_per_second": limits.max_starts_per_second,
            "tokens": 0.0,
            "tokens_at": None,
        }
        return await self._change(actor, name, values)

    async def _change(self, actor: Actor, name: str, values: dict[str, Any]) -> JobTypeView:
        validation.job_type(_ADMIN, name, self.jobs.types, ["type"])
        now = self.jobs.clock()
        await self.db.write(types_sql.upsert, name, {**values, "updated_at": now})
        self.changed()
        return await self.get(actor, name)

    # -- waiting claims ------------------------------------------------------------------

    def changed(self) -> None:
        """A type's pause or limits changed, here or (told by NOTIFY) on another replica:
        every waiting claim of this process tries again, with the limits read anew."""
        self.jobs.limited_hint.forget()
        for wake in list(self._waiting):
            wake()

    @contextlib.contextmanager
    def watching(self, wake: Callable[[], None]) -> Iterator[None]:
        """Call `wake` on every change, while the block runs."""
        self._waiting.add(wake)
        try:
            yield
        finally:
            self._waiting.discard(wake)

    @property
    def changes(self) -> int:
        """Changes heard of so far: hints read before the last one may be out of date."""
        return self.jobs.limited_hint.changes

    async def wait_hints(self, types: Collection[str] | None) -> WaitHints:
        """For a claim of `types` (None: every type) that found nothing and will wait. With
        none of them limited by the claims' hint, no read (a stale hint leaves a waiter
        to its rechecks for a type limited meanwhile, as its claims skip the type)."""
        names = list(self.jobs.types if types is None else types)
        hint = self.jobs.limited_hint
        await hint.read()
        limited = hint.fresh()
        if limited is not None and limited.isdisjoint(names):
            return WaitHints()
        found = await self.db.read(types_sql.states, names)
        live = {n: s for n, s in found.items() if not s.paused and s.limited}
        return WaitHints(frozenset(live), next_token_in(live, self.jobs.clock()))
