"""A worker: run it with `queuelog worker worker:worker` (from this directory), or
`python worker.py`. It stops cleanly on SIGTERM or Ctrl-C.

    QUEUELOG_URL=http://127.0.0.1:8000/graphql QUEUELOG_KEY=<worker key> queuelog worker worker:worker
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from queuelog.worker import PermanentError, RunningJob, Worker

JOB_TYPE = os.environ.get("JOB_TYPE", "email")

worker = Worker(concurrency=4)


@worker.handler(JOB_TYPE, timeout=60)
async def send_email(job: RunningJob) -> dict[str, Any]:
    to = job.payload.get("to")
    if not to:
        raise PermanentError("the payload has no address")  # no retry can fix this
    job.progress({"step": "sending"})
    await asyncio.sleep(0.05)  # the real work goes here
    return {"sent_to": to}


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.INFO)
    worker.run()
