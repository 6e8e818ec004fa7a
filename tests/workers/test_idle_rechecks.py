"""Idle waiting claims of the same types recheck together: one claim attempt a recheck
period for all of them, not one each, and only as many more as jobs are found. Counted
through real HTTP against a server in the test's process, on both backends."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any

import httpx
import pytest

from queuelog.events import claims
from queuelog.runtime import Services
from tests.support import LiveServer
from tests.workers.test_longpoll import answered, client, post, stop

PERIOD = 0.25  # the recheck period these tests set
WINDOW = 1.5  # six periods
CLAIM_WAIT = """mutation($t: [String!], $w: Int) {
  claimJob(types: $t, waitSeconds: $w) { job { id } userErrors { code } } }"""
ENQUEUE_LATER = """mutation($t: String!) {
  enqueueJob(input: {type: $t, delaySeconds: 1}) { job { id } } }"""


class ClaimsByTypes:
    """Counts the service's claim attempts by the types they ask for."""

    def __init__(self, services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
        self.counts: Counter[tuple[str, ...]] = Counter()
        self._claim = services.service.claim
        monkeypatch.setattr(services.service, "claim", self.claim)
        monkeypatch.setattr(claims, "RECHECK_SECONDS", PERIOD)

    async def claim(self, actor: Any, types: Sequence[str] | None, *args: Any) -> Any:
        self.counts[tuple(types or ())] += 1
        return await self._claim(actor, types, *args)

    def total(self) -> int:
        return sum(self.counts.values())

    async def until(self, count: int) -> None:
        for _ in range(600):
            if self.total() >= count:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"{self.total()} claims, not {count}")


def waiting(http: httpx.AsyncClient, url: str, job_type: str, n: int) -> list[Any]:
    body = {"query": CLAIM_WAIT, "variables": {"t": [job_type], "w": 30}}
    return [asyncio.create_task(http.post(url, json=body)) for _ in range(n)]


async def test_idle_waiters_of_one_type_make_one_claim_a_period(
    live: tuple[LiveServer, str], services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    (server, key), n = live, 12
    counted = ClaimsByTypes(services, monkeypatch)
    async with client(key, n) as http:
        claims_ = waiting(http, server.url, "pdf", n)
        await counted.until(2 * n)  # each claimed before and after joining the line, waits
        before = counted.total()
        await asyncio.sleep(WINDOW)
        rechecks = counted.total() - before
        assert not any(c.done() for c in claims_)
        await stop(claims_)
    # One a period (a late timer makes fewer, never more); each waiter alone: n a period.
    assert 1 <= rechecks <= WINDOW / PERIOD + 1, rechecks


async def test_waiters_of_other_types_recheck_apart(
    live: tuple[LiveServer, str], services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    (server, key), n = live, 4
    counted = ClaimsByTypes(services, monkeypatch)
    async with client(key, 2 * n) as http:
        claims_ = waiting(http, server.url, "pdf", n) + waiting(http, server.url, "email", n)
        await counted.until(4 * n)
        before = counted.counts.copy()
        await asyncio.sleep(WINDOW)
        rechecks = counted.counts - before
        await stop(claims_)
    for types in [("pdf",), ("email",)]:  # a claim of pdf proves nothing of email
        assert 1 <= rechecks[types] <= WINDOW / PERIOD + 1, rechecks


async def test_jobs_that_become_due_are_claimed_one_recheck_each(
    live: tuple[LiveServer, str], services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three jobs due in a second make no event then: a recheck finds one, which has the
    next waiter try at once, until one finds nothing."""
    (server, key), n = live, 6
    counted = ClaimsByTypes(services, monkeypatch)
    async with client(key, n) as http:
        claims_ = waiting(http, server.url, "sync", n)
        await counted.until(2 * n)
        ids = [
            (await post(server, key, ENQUEUE_LATER, t="sync"))["enqueueJob"]["job"]["id"]
            for _ in range(3)
        ]
        answers = await answered(claims_, 3)
        assert sorted(a["job"]["id"] for a in answers) == sorted(ids)
        await asyncio.sleep(2 * PERIOD)
        assert sum(c.done() for c in claims_) == 3  # the others still wait
        await stop(claims_)
    # Each enqueue woke one waiter (nothing due yet); then about one a period for the second
    # (at most 1.5 s: 6), three that found jobs and one that found nothing.
    assert counted.total() - 2 * n <= 3 + 6 + 3 + 1 + 2, counted.counts
