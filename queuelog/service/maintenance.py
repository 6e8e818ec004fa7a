"""The server's maintenance loop: rescue expired leases and roll throughput up every round,
prune now and then."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from queuelog.service.jobs import JobService
from queuelog.service.retention import prune
from queuelog.service.throughput import prune_rollups, roll_up

log = logging.getLogger("queuelog.maintenance")


async def maintenance_loop(service: JobService, interval: float) -> None:
    """Every `interval` seconds rescue expired leases and roll up new events; every
    `prune_interval_seconds` (and once at start) apply retention.
    A failed round is logged and the loop goes on."""
    loop = asyncio.get_running_loop()
    prune_every = service.settings.prune_interval_seconds
    next_prune = loop.time()
    while True:
        try:
            rescued = await service.rescue_expired()
            if rescued:
                log.info("rescued %d job(s) with expired leases", rescued)
            await roll_up(service.db)
            if loop.time() >= next_prune:
                next_prune = loop.time() + prune_every
                pruned = await prune(service)
                if any(pruned.values()):
                    log.info("pruned %s", pruned)
                # Throughput's per-minute counts outlive the jobs: kept as long as failed ones.
                age = timedelta(days=service.settings.retention_failed_days)
                await prune_rollups(service.db, service.clock() - age)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("maintenance round failed; retrying next round")
        await asyncio.sleep(interval)
