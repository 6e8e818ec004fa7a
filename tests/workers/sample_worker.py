"""The worker the process tests run with `queuelog worker tests.workers.sample_worker:worker`.

The job type comes from SAMPLE_TYPE; the payload says how long to work ("sleep"), and
whether to hang forever when SAMPLE_HANG is set (so that one process hangs and another
does not). SAMPLE_WAIT is how long each claim waits on the server."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from queuelog.worker import RunningJob, Worker

worker = Worker(
    concurrency=2,
    lease_seconds=int(os.environ.get("SAMPLE_LEASE", "30")),
    grace_seconds=float(os.environ.get("SAMPLE_GRACE", "30")),
    wait_seconds=int(os.environ.get("SAMPLE_WAIT", "1")),
)


@worker.handler(os.environ.get("SAMPLE_TYPE", "email"))
async def work(job: RunningJob) -> Any:
    if job.payload.get("hang") and os.environ.get("SAMPLE_HANG"):
        await asyncio.sleep(3600)
    await asyncio.sleep(float(job.payload.get("sleep", 0)))
    return {"n": job.payload.get("n")}
