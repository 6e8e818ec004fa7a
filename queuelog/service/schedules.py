"""Schedules: recurring jobs. Each due time enqueues one job through the ordinary enqueue,
once across every replica: a schedule's jobs are enqueued by the producer
`schedule:<name>` (which is how a job names its schedule) with the due time as the
idempotency key, so replicas that see the same due time get the same job. `next_run_at` is
the first due time not yet enqueued; the replica whose compare-and-set moves it on records
the run. After downtime only the latest missed due time is enqueued, once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from queuelog.config import ScheduleConfig
from queuelog.service import errors, validation
from queuelog.service.jobs import JobService
from queuelog.service.models import (
    NAME_MAX,
    Actor,
    EnqueueRequest,
    Job,
    Priority,
    Role,
    producer_of,
)
from queuelog.service.timing import timing
from queuelog.storage import schedules as schedules_sql

log = logging.getLogger("queuelog.schedules")


@dataclass(frozen=True, slots=True)
class ScheduleRequest:
    name: str
    type: str
    cron: str
    payload: Any = None
    priority: Priority = Priority.LOW
    timezone: str = "UTC"
    paused: bool = False


@dataclass(frozen=True, slots=True)
class Schedule:
    name: str
    type: str
    payload: Any
    priority: Priority
    cron: str
    timezone: str
    paused: bool
    next_run_at: datetime | None
    last_run_at: datetime | None
    last_job_id: int | None

    @classmethod
    def from_row(cls, row: Any) -> Schedule:
        return cls(
            name=row.name,
            type=row.type,
            payload=orjson.loads(row.payload),
            priority=Priority(row.priority),
            cron=row.cron,
            timezone=row.timezone,
            paused=row.paused,
            next_run_at=row.next_run_at,
            last_run_at=row.last_run_at,
            last_job_id=row.last_job_id,
        )


def _producer(name: str) -> Actor:
    return Actor(producer_of(name), Role.PRODUCER, max_priority=Priority.CRITICAL)


class ScheduleService:
    def __init__(self, jobs: JobService) -> None:
        self.jobs = jobs
        self.db = jobs.db

    def _values(self, req: ScheduleRequest, prefix: list[str]) -> dict[str, Any]:
        """The `schedules` row for `req`, or the DomainError that refuses it."""
        name = req.name
        if not 1 <= len(name) <= NAME_MAX or not name.isprintable():
            raise errors.ValidationFailed(
                f"name must be 1 to {NAME_MAX} printable characters", [*prefix, "name"]
            )
        admin = Actor("admin", Role.ADMIN, max_priority=Priority.CRITICAL)
        validation.job_type(admin, req.type, self.jobs.types, [*prefix, "type"])
        limit = self.jobs.settings.payload_max_bytes
        text = validation.json_object(req.payload, limit, [*prefix, "payload"], "payload")
        when = timing(req.cron, req.timezone, prefix)
        now = self.jobs.clock()
        return {
            "name": name,
            "type": req.type,
            "payload": text,
            "priority": int(req.priority),
            "cron": req.cron,
            "timezone": req.timezone,
            "paused": req.paused,
            "next_run_at": None if req.paused else when.next_after(now),
            "created_at": now,
            "updated_at": now,
        }

    async def upsert(self, req: ScheduleRequest) -> Schedule:
        """Create or replace a schedule; it is next due at its first due time from now."""
        values = self._values(req, ["input"])
        return Schedule.from_row(await self.db.write(schedules_sql.put, values))

    async def seed(self, configs: Mapping[str, ScheduleConfig]) -> None:
        """Create the configured schedules that do not exist yet (changes made through the
        API since are kept)."""
        for name, c in configs.items():
            req = ScheduleRequest(
                name, c.type, c.cron, c.payload, Priority[c.priority], c.timezone, c.paused
            )
            values = self._values(req, ["schedules", name])
            if await self.db.write(schedules_sql.add_missing, values):
                log.info("created schedule %r from the configuration", req.name)

    async def delete(self, name: str) -> bool:
        return await self.db.write(schedules_sql.delete, name)

    async def list(self) -> list[Schedule]:
        return [Schedule.from_row(r) for r in await self.db.read(schedules_sql.all_by_name)]

    async def run_now(self, name: str) -> tuple[Job, bool]:
        """Enqueue the schedule's job now, besides its due times."""
        row = await self.db.read(schedules_sql.get, name)
        if row is None:
            raise errors.NotFound(f"no schedule {name!r}", ["name"])
        return await self.jobs.enqueue(_producer(name), self._request(row, None))

    @staticmethod
    def _request(row: Any, due: datetime | None) -> EnqueueRequest:
        key = None if due is None else due.isoformat()
        return EnqueueRequest(
            type=row.type,
            payload=orjson.loads(row.payload),
            priority=Priority(row.priority),
            idempotency_key=key,
        )

    async def fire_due(self) -> int:
        """Enqueue the latest due time of each schedule that is due; returns how many
        schedules this replica moved on."""
        now = self.jobs.clock()
        moved = 0
        for row in await self.db.read(schedules_sql.due, now):
            when = timing(row.cron, row.timezone)
            due = when.latest(now)
            job_id = None
            try:
                job, _ = await self.jobs.enqueue(_producer(row.name), self._request(row, due))
                job_id = job.id
            except errors.DomainError as exc:  # e.g. its type is no longer configured
                log.warning("schedule %r could not enqueue: %s", row.name, exc.message)
            next_at = when.next_after(due)
            if await self.db.write(
                schedules_sql.advance, row.name, row.next_run_at, due, job_id, next_at
            ):
                moved += 1
        return moved


async def schedule_loop(schedules: ScheduleService, interval: float) -> None:
    """Every `interval` seconds, enqueue what is due. A failed round is logged; the loop
    goes on."""
    while True:
        try:
            await schedules.fire_due()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("schedule round failed; retrying next round")
        await asyncio.sleep(interval)
