"""A JobService on each backend with a clock the test moves and a seeded random source."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from queuelog.config import Settings
from queuelog.runtime import Services
from queuelog.service.jobs import JobService
from queuelog.storage.db import Database
from queuelog.storage.tables import job_events, jobs
from queuelog.storage.tx import Tx
from tests.support import Clock


@pytest.fixture
def db_url(reused_db_url: str) -> str:
    return reused_db_url


@pytest.fixture
def make_service(services: Services, settings: Settings, clock: Clock) -> Callable[..., JobService]:
    """A JobService on the test's database; keyword arguments override settings."""

    def make(**overrides: Any) -> JobService:
        return JobService(
            services.db, settings.model_copy(update=overrides), clock=clock, rand=random.Random(0)
        )

    return make


@pytest.fixture
def svc(make_service: Callable[..., JobService]) -> JobService:
    return make_service()


def snapshot(db: Database) -> tuple[list[tuple[Any, ...]], int]:
    """Every job row, and how many events: what 'the database did not change' compares."""

    def read(tx: Tx) -> tuple[list[tuple[Any, ...]], int]:
        rows = [tuple(r) for r in tx.conn.execute(sa.select(jobs).order_by(jobs.c.id))]
        n = tx.conn.execute(sa.select(sa.func.count()).select_from(job_events)).scalar_one()
        return rows, int(n)

    return db.read_sync(read)
