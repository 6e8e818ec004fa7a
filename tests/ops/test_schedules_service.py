"""Schedules in the service, on both backends with a test clock: one job per due time
however many replicas fire, only the latest missed time after downtime, pausing stops it,
nextRunAt/lastRunAt move as they should."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from queuelog.runtime import Services
from queuelog.service.errors import InvalidSchedule
from queuelog.service.jobs import JobService
from queuelog.service.models import schedule_of
from queuelog.service.schedules import ScheduleRequest, ScheduleService
from queuelog.storage.tables import jobs

T0 = datetime(2026, 12, 1, 12, 0, 0, 500_000, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def replicas(services: Services, clock: Clock) -> list[ScheduleService]:
    """Three replicas' schedule services on one database."""
    return [ScheduleService(JobService(services.db, services.settings, clock=clock)) for _ in "abc"]


async def scheduled_jobs(services: Services) -> list[tuple[str, str | None]]:
    def read(tx: object) -> list[tuple[str, str | None]]:
        stmt = sa.select(jobs.c.producer, jobs.c.idempotency_key).order_by(jobs.c.id)
        return [tuple(r) for r in tx.conn.execute(stmt)]  # type: ignore[attr-defined]

    return await services.db.read(read)


async def test_each_due_time_makes_one_job_across_replicas(
    services: Services, replicas: list[ScheduleService], clock: Clock
) -> None:
    a = replicas[0]
    s = await a.upsert(ScheduleRequest(name="tick", type="email", cron="@every 10s"))
    assert s.next_run_at == datetime(2026, 12, 1, 12, 0, 10, tzinfo=UTC)
    assert s.last_run_at is None
    assert await asyncio.gather(*(r.fire_due() for r in replicas)) == [0, 0, 0]  # not yet due
    for step in range(3):
        clock.now += timedelta(seconds=10)
        moved = await asyncio.gather(*(r.fire_due() for r in replicas))
        assert sum(moved) == 1, step
    made = await scheduled_jobs(services)
    assert [p for p, _ in made] == ["schedule:tick"] * 3
    assert schedule_of(made[0][0]) == "tick"
    (s,) = await a.list()
    assert s.last_run_at == datetime(2026, 12, 1, 12, 0, 30, tzinfo=UTC)
    assert s.next_run_at == datetime(2026, 12, 1, 12, 0, 40, tzinfo=UTC)
    assert s.last_job_id is not None


async def test_after_downtime_only_the_latest_missed_time_runs_once(
    services: Services, replicas: list[ScheduleService], clock: Clock
) -> None:
    a = replicas[0]
    await a.upsert(ScheduleRequest(name="m", type="pdf", cron="*/5 * * * *"))
    clock.now += timedelta(hours=2)  # 24 due times missed
    await asyncio.gather(*(r.fire_due() for r in replicas))
    await asyncio.gather(*(r.fire_due() for r in replicas))
    made = await scheduled_jobs(services)
    assert made == [("schedule:m", "2026-12-01T14:00:00+00:00")]
    (s,) = await a.list()
    assert s.next_run_at == datetime(2026, 12, 1, 14, 5, tzinfo=UTC)


async def test_a_paused_schedule_does_not_run_and_run_now_does(
    services: Services, replicas: list[ScheduleService], clock: Clock
) -> None:
    a = replicas[0]
    req = ScheduleRequest(name="p", type="sync", cron="@every 1m", paused=True)
    s = await a.upsert(req)
    assert s.paused and s.next_run_at is None
    clock.now += timedelta(minutes=5)
    assert await a.fire_due() == 0
    job, created = await a.run_now("p")
    assert created and job.producer == "schedule:p" and job.idempotency_key is None
    s = await a.upsert(ScheduleRequest(name="p", type="sync", cron="@every 1m"))
    assert s.next_run_at == datetime(2026, 12, 1, 12, 6, tzinfo=UTC)
    assert len(await scheduled_jobs(services)) == 1


async def test_rules(replicas: list[ScheduleService]) -> None:
    a = replicas[0]
    with pytest.raises(InvalidSchedule):
        await a.upsert(ScheduleRequest(name="x", type="email", cron="* * *"))
    with pytest.raises(InvalidSchedule):
        await a.upsert(ScheduleRequest(name="x", type="email", cron="* * * * *", timezone="X/Y"))
    assert not await a.delete("x")
    await a.upsert(ScheduleRequest(name="x", type="email", cron="* * * * *"))
    assert await a.delete("x")
    assert await a.list() == []
