"""Idle waiting claims of the same types recheck together: one claim attempt a recheck
period for all of them, not one each, and only as many more as jobs are found. Counted
through real HTTP against a server in the test's process, on both backends."""

from __future__ import annotations

import asyncio

import pytest

from queuelog.runtime import Services
from tests.support import LiveServer
from tests.workers.longpoll import CountedClaims, answered, client, post, stop, waiting_claims

PERIOD = 0.25  # the recheck period these tests set
WINDOW = 1.5  # six periods
ENQUEUE_LATER = """mutation($t: String!) {
  enqueueJob(input: {type: $t, delaySeconds: 1}) { job { id } } }"""


async def test_idle_waiters_of_one_type_make_one_claim_a_period(
    live: tuple[LiveServer, str], services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    (server, key), n = live, 12
    counted = CountedClaims(services, monkeypatch, handoff=True, recheck=PERIOD)
    async with client(key, n) as http:
        claims_ = waiting_claims(http, server.url, "pdf", n)
        await counted.until(2 * n)  # each claimed before and after joining the line, waits
        before = counted.count
        await asyncio.sleep(WINDOW)
        rechecks = counted.count - before
        assert not any(c.done() for c in claims_)
        await stop(claims_)
    # One a period (a late timer makes fewer, never more); each waiter alone: n a period.
    assert 1 <= rechecks <= WINDOW / PERIOD + 1, rechecks


async def test_waiters_of_other_types_recheck_apart(
    live: tuple[LiveServer, str], services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    (server, key), n = live, 4
    counted = CountedClaims(services, monkeypatch, handoff=True, recheck=PERIOD)
    async with client(key, 2 * n) as http:
        claims_ = waiting_claims(http, server.url, "pdf", n) + waiting_claims(
            http, server.url, "email", n
        )
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
    counted = CountedClaims(services, monkeypatch, handoff=True, recheck=PERIOD)
    async with client(key, n) as http:
        claims_ = waiting_claims(http, server.url, "sync", n)
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
    assert counted.count - 2 * n <= 3 + 6 + 3 + 1 + 2, counted.counts
