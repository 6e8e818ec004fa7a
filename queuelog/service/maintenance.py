"""The server's maintenance loop: rescue expired leases often, prune now and then."""

from __future__ import annotations

import asyncio
import logging

from queuelog.service.jobs import JobService
from queuelog.service.retention import prune

log = logging.getLogger("queuelog.maintenance")
PRUNE_EVERY = 12  # rounds


async def maintenance_loop(service: JobService, interval: float) -> None:
    rounds = 0
    while True:
        try:
            rescued = await service.rescue_expired()
            if rescued:
                log.info("rescued %d job(s) with expired leases", rescued)
            if rounds % PRUNE_EVERY == 0:
                pruned = await prune(service)
                if any(pruned.values()):
                    log.info("pruned %s", pruned)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("maintenance round failed; retrying next round")
        rounds += 1
        await asyncio.sleep(interval)
