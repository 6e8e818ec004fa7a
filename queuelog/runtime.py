"""The running queue: the database, the key store, the event feed and the job service,
opened together on one database; what the server and the CLI both open."""

from __future__ import annotations

from dataclasses import dataclass

from queuelog.auth.keys import KeyStore
from queuelog.config import Settings
from queuelog.events.claims import PendingHints
from queuelog.events.feed import EventFeed
from queuelog.service.job_types import JobTypeService
from queuelog.service.jobs import JobService
from queuelog.service.schedules import ScheduleService
from queuelog.storage.db import Database


@dataclass(slots=True)
class Services:
    settings: Settings
    db: Database
    service: JobService
    keys: KeyStore
    feed: EventFeed
    schedules: ScheduleService
    job_types: JobTypeService


def open_services(settings: Settings) -> Services:
    db = Database(
        settings.database_url,
        sqlite_synchronous=settings.sqlite_synchronous,
        busy_timeout_ms=settings.sqlite_busy_timeout_ms,
        pool_size=settings.pool_size,
    )
    service = JobService(db, settings)
    feed = EventFeed(
        db,
        window=settings.event_window,
        poll_interval=settings.event_poll_seconds,
        idle=min(5.0, settings.key_recheck_seconds),
    )
    service.observer = PendingHints(feed)  # new jobs wake this process's waiting claims
    return Services(
        settings=settings,
        db=db,
        service=service,
        keys=KeyStore(db, settings.job_types, settings.key_cache_seconds),
        feed=feed,
        schedules=ScheduleService(service),
        job_types=JobTypeService(service),
    )
