"""The claim's hint of which types are limited (`LimitedHint`), on SQLite and PostgreSQL: a
claim that comes back short tries no limited claim (a row lock) for a type the hint calls
unlimited, and a stale hint never lets a claim pass a limit: it only delays the type until
the hint is read again (a change heard of, or its age)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from queuelog.service import job_types
from queuelog.service.job_types import JobTypeService, Limits
from queuelog.service.jobs import JobService
from queuelog.service.models import Actor, EnqueueRequest, Priority, Role
from queuelog.storage import job_types as types_sql

P1 = Actor("producer-1", Role.PRODUCER)
W1 = Actor("worker-1", Role.WORKER)
ADMIN = Actor("admin", Role.ADMIN, max_priority=Priority.CRITICAL)


class Counted:
    """Calls of the type-row statements a claim may make: the read of the rows (`states`,
    by the claim of several types or by the hint) and the limited claim's row lock."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: Counter[str] = Counter()
        for name in ("states", "claim_limited"):
            monkeypatch.setattr(types_sql, name, self._counting(name, getattr(types_sql, name)))

    def _counting(self, name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kw: Any) -> Any:
            self.calls[name] += 1
            return call(*args, **kw)

        return counted


async def enqueue(svc: JobService, n: int, job_type: str = "email") -> list[int]:
    jobs = await svc.enqueue_many(P1, [EnqueueRequest(type=job_type) for _ in range(n)])
    return [j.id for j in jobs]


async def claim(svc: JobService, types: list[str], limit: int = 10) -> list[int]:
    return [j.id for j in await svc.claim(W1, types, None, limit)]


async def test_short_claims_of_unlimited_types_lock_no_type_row(
    svc: JobService, monkeypatch: pytest.MonkeyPatch
) -> None:
    await JobTypeService(svc).set_limits(ADMIN, "pdf", Limits(max_running=1))
    counted = Counted(monkeypatch)
    ids = await enqueue(svc, 2)
    assert await claim(svc, ["email"]) == ids  # short of its limit of 10
    for _ in range(10):
        assert await claim(svc, ["email"]) == []
        assert await claim(svc, ["email", "sync"]) == []
    # One read of the rows (the hint), for 21 claims; before, a row lock for each claim
    # of one type and a read of the rows for each claim of several.
    assert counted.calls == Counter({"states": 1}), counted.calls
    pdf = await enqueue(svc, 2, "pdf")
    assert await claim(svc, ["email", "pdf"]) == pdf[:1]  # the limited type: its claim
    assert counted.calls["claim_limited"] == 1


async def test_a_limit_set_on_another_replica_holds_while_the_hint_is_stale(
    svc: JobService, make_service: Callable[..., JobService], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert await claim(svc, ["email"]) == []  # the hint read: nothing is limited
    other = make_service()  # another replica on the same database
    await JobTypeService(other).set_limits(ADMIN, "email", Limits(max_running=1))
    ids = await enqueue(svc, 3)
    # This process has not heard of the limit: its claim skips the type rather than pass it.
    assert await claim(svc, ["email"]) == []
    assert await claim(svc, ["email", "pdf"]) == []
    svc.limited_hint.forget()  # what NOTIFY makes `JobTypeService.changed` do
    assert await claim(svc, ["email"]) == ids[:1]
    assert await claim(svc, ["email"]) == []


async def test_a_hint_not_told_of_a_change_is_read_again_when_old(
    svc: JobService, make_service: Callable[..., JobService], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert await claim(svc, ["email"]) == []
    other = make_service()
    await JobTypeService(other).set_limits(ADMIN, "email", Limits(max_running=2))
    ids = await enqueue(svc, 3)
    assert await claim(svc, ["email"]) == []
    monkeypatch.setattr(job_types, "HINT_SECONDS", 0.0)  # no notification came: it ages
    assert await claim(svc, ["email"]) == ids[:2]
    assert await claim(svc, ["email"]) == []
    monkeypatch.undo()
    await JobTypeService(other).set_limits(ADMIN, "email", Limits())
    # The hint still says limited; the one-statement claim takes the now unlimited type.
    assert await claim(svc, ["email"]) == ids[2:]


async def test_a_pause_heard_of_is_obeyed_at_once(svc: JobService) -> None:
    types = JobTypeService(svc)
    await types.set_limits(ADMIN, "email", Limits(max_running=5))
    ids = await enqueue(svc, 3)
    assert await claim(svc, ["email"], 1) == ids[:1]
    await types.pause(ADMIN, "email")
    assert await claim(svc, ["email"]) == []
    await types.resume(ADMIN, "email")
    assert await claim(svc, ["email"]) == ids[1:]


async def test_wait_hints_read_the_rows_only_for_types_the_hint_calls_limited(
    svc: JobService, monkeypatch: pytest.MonkeyPatch
) -> None:
    types = JobTypeService(svc)
    await types.set_limits(ADMIN, "pdf", Limits(max_starts_per_second=1.0))
    counted = Counted(monkeypatch)
    for _ in range(5):  # a waiting claim's hints, for each claim that is about to wait
        assert (await types.wait_hints(["email", "sync"])).limited == frozenset()
    assert counted.calls == Counter({"states": 1})  # the hint's read only
    assert (await types.wait_hints(["email", "pdf"])).limited == {"pdf"}
    assert counted.calls == Counter({"states": 2})
