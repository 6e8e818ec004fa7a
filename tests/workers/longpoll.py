"""What the long-poll tests share: waiting claims over real HTTP, and a count of the service's
claim attempts."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any

import httpx
import pytest

from queuelog.runtime import Services
from tests.support import LiveServer

CLAIM_ONE = """mutation($t: [String!], $w: Int) {
  claimJob(types: $t, waitSeconds: $w) { job { id } userErrors { code } } }"""


async def post(server: LiveServer, key: str, query: str, **variables: Any) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        response = await http.post(server.url, json={"query": query, "variables": variables})
    body = response.json()
    assert "errors" not in body, body
    return dict(body["data"])


class CountedClaims:
    """Counts the service's claim attempts, by the types they ask for; `steal_next` makes
    the next attempt find its job claimed by someone else a moment before. Waiters
    recheck every `recheck` seconds (by default only a wake-up makes one try again).
    Unless `handoff`, no enqueue claims for a waiting claim: each is woken, and claims for
    itself."""

    def __init__(
        self,
        services: Services,
        monkeypatch: pytest.MonkeyPatch,
        handoff: bool = False,
        recheck: float = 600.0,
    ) -> None:
        self.counts: Counter[tuple[str, ...]] = Counter()
        self.steal_next = False
        self._claim = services.service.claim
        monkeypatch.setattr(services.service, "claim", self.claim)
        if not handoff:
            monkeypatch.setattr(services.service.standing, "take", lambda types: [])
        every = services.service.settings.model_copy(update={"claim_recheck_seconds": recheck})
        monkeypatch.setattr(services.service, "settings", every)

    @property
    def count(self) -> int:
        return sum(self.counts.values())

    async def claim(self, actor: Any, types: Sequence[str] | None, *args: Any) -> Any:
        self.counts[tuple(types or ())] += 1
        if self.steal_next:
            self.steal_next = False
            assert await self._claim(actor, types, *args)  # another worker takes it first
        return await self._claim(actor, types, *args)

    async def until(self, count: int) -> None:
        for _ in range(600):
            if self.count >= count:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"{self.count} claims, not {count}")


def waiting_claims(http: httpx.AsyncClient, url: str, job_type: str, n: int) -> list[Any]:
    body = {"query": CLAIM_ONE, "variables": {"t": [job_type], "w": 30}}
    return [asyncio.create_task(http.post(url, json=body)) for _ in range(n)]


async def answered(waiting: list[asyncio.Task[Any]], n: int) -> list[Any]:
    """The claimJob answers of the first `n` waiting claims to finish."""
    done: set[asyncio.Task[Any]] = set()
    while len(done) < n:
        pending = [t for t in waiting if t not in done]
        finished, _ = await asyncio.wait(pending, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        assert finished, "no waiting claim was answered"
        done |= finished
    return [t.result().json()["data"]["claimJob"] for t in done]


async def stop(waiting: list[asyncio.Task[Any]]) -> None:
    for task in waiting:
        task.cancel()
    await asyncio.gather(*waiting, return_exceptions=True)


def client(key: str, n: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=n + 1)
    return httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60, limits=limits)
