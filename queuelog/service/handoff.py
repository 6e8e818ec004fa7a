"""Hand-off: a claim waiting for jobs (a long poll) stands in line here, and an enqueue
through this process claims for it in the enqueue's own transaction. The waiting worker then
gets its job with one commit instead of two, and without a wake-up in between.

The claim run for a standing claim is the one its worker would run itself (its key, types,
lease and limit; highest priority first), right after the enqueue's insert: it may take
other jobs than the new ones, or none (a paused or limited type). Either way its answer
(`Standing.answer`) is what that claim found, and the worker's request answers with it, or
claims on its own when it is empty. Jobs whose runAt lies ahead take no standing claim.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from queuelog.service.models import Actor, Job


@dataclass(eq=False)
class Standing:
    """One waiting claim, as it would claim (`types`: the types it may take), and the line
    it stands in."""

    line: StandingClaims
    actor: Actor
    types: list[str]
    lease_seconds: int | None
    limit: int
    # Set once an enqueue took this claim: the jobs its claim found (maybe none).
    answer: asyncio.Future[list[Job]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class StandingClaims:
    """The standing claims of one process, first come first served."""

    def __init__(self) -> None:
        self._line: list[Standing] = []

    def __len__(self) -> int:
        return len(self._line)

    def stand(self, standing: Standing) -> None:
        self._line.append(standing)

    def withdraw(self, standing: Standing) -> bool:
        """Take `standing` out of line; False when an enqueue took it first (its `answer`
        is then on its way)."""
        if standing in self._line:
            self._line.remove(standing)
            return True
        return False

    def take(self, new_types: Iterable[str]) -> list[Standing]:
        """The standing claims that new jobs of `new_types` (one entry a job) go to, out of
        line: in line order, each that wants a type with jobs left, counting its limit."""
        left = Counter(new_types)
        if not self._line or not left:
            return []
        taken = []
        for standing in list(self._line):
            room = standing.limit
            for t in standing.types:
                n = min(room, left[t])
                left[t] -= n
                room -= n
            if room < standing.limit:
                self._line.remove(standing)
                taken.append(standing)
            if not +left:
                break
        return taken

    @staticmethod
    def answer(standing: Standing, jobs: list[Job]) -> None:
        if not standing.answer.done():
            standing.answer.set_result(jobs)
