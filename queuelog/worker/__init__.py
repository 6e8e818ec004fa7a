"""Run Python functions as queuelog job handlers: `Worker`, `PermanentError`, `RunningJob`."""

from queuelog.worker.job import JobCancelled, PermanentError, RunningJob
from queuelog.worker.worker import Worker

__all__ = ["JobCancelled", "PermanentError", "RunningJob", "Worker"]
