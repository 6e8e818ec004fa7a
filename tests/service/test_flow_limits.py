"""Flow limits of a job type on the service, on SQLite and PostgreSQL, with a clock the test
moves: maxRunning, maxRunningPerKey, the token bucket of maxStartsPerSecond, pause, and the
TOML file's seeds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from queuelog.service.job_types import JobTypeService, Limits
from queuelog.service.jobs import JobService
from queuelog.service.models import Actor, EnqueueRequest, Priority, Role
from tests.support import Clock

P1 = Actor("producer-1", Role.PRODUCER)
W1 = Actor("worker-1", Role.WORKER)
ADMIN = Actor("admin", Role.ADMIN, max_priority=Priority.CRITICAL)


async def enqueue(svc: JobService, n: int = 1, **kw: Any) -> list[int]:
    kw.setdefault("type", "email")
    jobs = await svc.enqueue_many(P1, [EnqueueRequest(**kw) for _ in range(n)])
    return [j.id for j in jobs]


async def claim(svc: JobService, limit: int = 10, types: list[str] | None = None) -> list[int]:
    return [j.id for j in await svc.claim(W1, types or ["email"], None, limit)]


async def test_max_running_caps_claims_until_a_job_leaves_running(svc: JobService) -> None:
    types = JobTypeService(svc)
    await types.set_limits(ADMIN, "email", Limits(max_running=2))
    ids = await enqueue(svc, 5)
    assert await claim(svc) == ids[:2]
    assert await claim(svc) == []
    await svc.complete(W1, ids[0], None)
    assert await claim(svc) == [ids[2]]
    assert await claim(svc, 1) == []
    await svc.fail(W1, ids[1], "boom", retryable=False)
    assert await claim(svc) == [ids[3]]
    view = await types.get(ADMIN, "email")
    assert view.stats["running"] == 2 and view.limits == Limits(max_running=2)


async def test_a_saturated_key_blocks_neither_other_keys_nor_keyless_jobs(
    svc: JobService,
) -> None:
    await JobTypeService(svc).set_limits(ADMIN, "email", Limits(max_running_per_key=1))
    a = await enqueue(svc, 3, concurrency_key="a")
    b = await enqueue(svc, 2, concurrency_key="b")
    free = await enqueue(svc, 2)
    assert await claim(svc) == [a[0], b[0], *free]  # claim order, one per key
    assert await claim(svc) == []
    await svc.complete(W1, a[0], None)
    assert await claim(svc) == [a[1]]


async def test_max_running_and_per_key_together(svc: JobService) -> None:
    limits = Limits(max_running=3, max_running_per_key=2)
    await JobTypeService(svc).set_limits(ADMIN, "email", limits)
    a = await enqueue(svc, 4, concurrency_key="a")
    b = await enqueue(svc, 2, concurrency_key="b")
    assert await claim(svc) == [a[0], a[1], b[0]]
    assert await claim(svc) == []


async def test_starts_per_second_follow_a_token_bucket(svc: JobService, clock: Clock) -> None:
    await JobTypeService(svc).set_limits(ADMIN, "email", Limits(max_starts_per_second=2))
    ids = await enqueue(svc, 9)
    assert await claim(svc) == ids[:2]  # the burst: max(1, rate)
    assert await claim(svc) == []
    clock.advance(0.5)
    assert await claim(svc) == [ids[2]]
    clock.advance(0.25)
    assert await claim(svc) == []  # half a token
    clock.advance(60)
    assert await claim(svc) == ids[3:5]  # the bucket holds the burst, no more


async def test_a_slow_rate_still_starts_one_job(svc: JobService, clock: Clock) -> None:
    await JobTypeService(svc).set_limits(ADMIN, "email", Limits(max_starts_per_second=0.1))
    ids = await enqueue(svc, 3)
    assert await claim(svc) == [ids[0]]
    clock.advance(9)
    assert await claim(svc) == []
    clock.advance(1)
    assert await claim(svc) == [ids[1]]


async def test_a_limited_type_does_not_hold_up_an_unlimited_one(svc: JobService) -> None:
    await JobTypeService(svc).set_limits(ADMIN, "email", Limits(max_running=1))
    emails = await enqueue(svc, 3, priority=Priority.MEDIUM)
    pdfs = await enqueue(svc, 2, type="pdf")
    assert sorted(await claim(svc, 10, ["email", "pdf"])) == sorted([emails[0], *pdfs])


async def test_removing_limits_and_pausing(svc: JobService) -> None:
    types = JobTypeService(svc)
    await types.set_limits(ADMIN, "email", Limits(max_running=1))
    ids = await enqueue(svc, 3)
    assert await claim(svc) == ids[:1]
    await types.pause(ADMIN, "email")
    assert await claim(svc) == []
    await types.set_limits(ADMIN, "email", Limits())  # paused still
    assert await claim(svc) == []
    await types.resume(ADMIN, "email")
    assert await claim(svc) == ids[1:]


async def test_the_toml_file_seeds_only_types_without_a_row(
    make_service: Callable[..., JobService], tmp_path: Any
) -> None:
    cfg = tmp_path / "queuelog.toml"
    cfg.write_text("[types.email]\nmax_running = 2\n[types.pdf]\npaused = true\n")
    svc = make_service(config=cfg)
    types = JobTypeService(svc)
    await types.seed()
    email, pdf = await types.get(ADMIN, "email"), await types.get(ADMIN, "pdf")
    assert email.limits == Limits(max_running=2) and not email.paused
    assert pdf.paused and pdf.limits == Limits()
    await types.set_limits(ADMIN, "email", Limits(max_running=5))
    await types.resume(ADMIN, "pdf")
    await JobTypeService(make_service(config=cfg)).seed()  # a restart with the same file
    email, pdf = await types.get(ADMIN, "email"), await types.get(ADMIN, "pdf")
    assert email.limits == Limits(max_running=5) and not pdf.paused
