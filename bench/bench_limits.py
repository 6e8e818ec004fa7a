"""9. Claim latency with job-type limits against without, at a small and a large backlog.

The backlogs are loaded as in section 4 (`bench_backlog`: raw bulk SQL, never ANALYZEd,
statements prepared on the empty queue), every job with one of 1,000 concurrency keys, and
50 of them claimed and left RUNNING, so a limited claim must skip the keys they hold. In
each repeat, each size is measured twice, first without limits and then with the type's
maxRunning, maxRunningPerKey (1) and maxStartsPerSecond all set, none low enough to refuse
a claim; each timed claim goes through `JobService.claim` and its job is then completed,
untimed. Two medians of paired ratios come out: with limits, the largest size's p50 over
the smallest's in the same repeat (the target: the limited claim stays flat with the
backlog), and, at each size, the p50 with limits over the p50 without in the same repeat
(what the limits cost).
"""

from __future__ import annotations

import random
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.bench_backlog import EMPTY_CLAIMS, WORKER, load, paired, pending, timed_claims
from bench.common import Profile, database_url, median, percentile
from queuelog.config import Settings
from queuelog.runtime import Services, open_services
from queuelog.service.job_types import Limits
from queuelog.service.models import Actor, Priority, Role
from queuelog.storage.migrate import migrate

ADMIN = Actor("bench-admin", Role.ADMIN, max_priority=Priority.CRITICAL)
KEYS = 1_000
HELD = 50  # jobs left RUNNING, each holding its key
NO_LIMITS = Limits()
# None of them refuses a claim here: HELD + 1 running at most, one per key, far under the rate.
LIMITS = Limits(max_running=10_000, max_running_per_key=1, max_starts_per_second=1_000_000.0)
CONFIGS = {"without": NO_LIMITS, "with": LIMITS}


@dataclass(slots=True)
class _Size:
    """One backlog size: its database, its services, and the p50 and p99 (ms) of each run,
    by configuration."""

    size: int
    url: str
    services: Services
    p50s: dict[str, list[float]] = field(default_factory=lambda: {c: [] for c in CONFIGS})
    p99s: dict[str, list[float]] = field(default_factory=lambda: {c: [] for c in CONFIGS})

    async def limit(self, limits: Limits) -> None:
        await self.services.job_types.set_limits(ADMIN, "email", limits)

    async def prepare(self) -> None:
        """Claim from the empty queue both ways, so both claims' statements are prepared
        and planned on an empty table (as in section 4)."""
        for limits in (LIMITS, NO_LIMITS):
            await self.limit(limits)
            for _ in range(EMPTY_CLAIMS):
                assert await self.services.service.claim(WORKER, ["email"], None) == []

    def top_up(self, backend: str, rng: random.Random) -> None:
        load(backend, self.url, self.size - pending(self.url, backend), rng, KEYS)


async def run(backend: str, workdir: Path, profile: Profile) -> dict[str, Any]:
    """For the smallest and largest backlog sizes of `profile`, without and with limits:
    the median over repeats of each run's p50 and p99 claim latency (ms); `ratio`: with
    limits, the median of the paired largest-over-smallest p50 ratios; `cost`: at each
    size, the median of the paired with-over-without p50 ratios."""
    rng = random.Random(9)
    sizes: list[_Size] = []
    with ExitStack() as stack:
        for size in (profile.backlogs[0], profile.backlogs[-1]):
            url = stack.enter_context(database_url(backend, workdir))
            services = open_services(Settings(database_url=url, job_types=("email",)))
            stack.callback(services.db.close)  # runs before its database is dropped
            migrate(services.db)
            sizes.append(_Size(size, url, services))
            await sizes[-1].prepare()
        for s in sizes:
            s.top_up(backend, rng)
            held = await s.services.service.claim(WORKER, ["email"], None, limit=HELD)
            assert len(held) == HELD
        for _ in range(profile.repeats):
            for s in sizes:
                for config, limits in CONFIGS.items():
                    await s.limit(limits)
                    s.top_up(backend, rng)
                    took = await timed_claims(s.services.service, "email", profile.claims)
                    s.p50s[config].append(percentile(took, 50) * 1e3)
                    s.p99s[config].append(percentile(took, 99) * 1e3)
    small, large = sizes
    out: dict[str, Any] = {
        str(s.size): {
            c: {"p50_ms": median(s.p50s[c]), "p99_ms": median(s.p99s[c])} for c in CONFIGS
        }
        for s in sizes
    }
    ratios = paired(large.p50s["with"], small.p50s["with"])
    out["ratio"] = median(ratios)
    out["ratios"] = ratios
    out["ratio_without"] = median(paired(large.p50s["without"], small.p50s["without"]))
    out["cost"] = {str(s.size): median(paired(s.p50s["with"], s.p50s["without"])) for s in sizes}
    out["keys"], out["held"] = KEYS, HELD
    return out


def report(results: dict[str, dict[str, Any]]) -> list[str]:
    """The section of benchmarks.md, from each backend's results."""
    out = [
        "Each timed claim is one `email` job through `JobService.claim` (then completed, "
        f"untimed), from a backlog whose jobs each carry one of {KEYS:,} concurrency keys, "
        f"{HELD} of them held by RUNNING jobs. Without: the type has no limits (the one-"
        "statement claim). With: maxRunning, maxRunningPerKey 1 and maxStartsPerSecond set, "
        "none low enough to refuse a claim, so the figures are the cost of obeying them: "
        "the type's row locked, running counts read, held keys skipped. Each size has its "
        "own database, measured without then with limits in each repeat; ratios are medians "
        "of ratios paired within a repeat.",
        "",
        "| backend | pending jobs | without p50 ms | without p99 ms | with p50 ms "
        "| with p99 ms | with / without p50 |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        for size in (k for k in r if k.isdigit()):
            w, o = r[size]["with"], r[size]["without"]
            out.append(
                f"| {name} | {int(size):,} | {o['p50_ms']:.3f} | {o['p99_ms']:.3f} | "
                f"{w['p50_ms']:.3f} | {w['p99_ms']:.3f} | {r['cost'][size]:.2f}x |"
            )
    out.append("")
    for name, r in results.items():
        out.append(
            f"- {name}: with limits, the largest backlog's p50 is {r['ratio']:.2f}x the "
            f"smallest's (without: {r['ratio_without']:.2f}x)"
        )
    return out
