"""A Python client for queuelog's API: `Client` (blocking) and `AsyncClient` (asyncio).

Both read the server's URL (the GraphQL endpoint, e.g. http://127.0.0.1:8000/graphql) and the
API key from QUEUELOG_URL and QUEUELOG_KEY when not given. Results are dataclasses; a
refusal raises `QueuelogError` (or its subclasses) with the server's code."""

from queuelog.client.clients import AsyncClient, Client
from queuelog.client.models import (
    BadResponse,
    ConnectionFailed,
    Failed,
    Job,
    JobEvent,
    JobPage,
    JobProgress,
    JobStatus,
    Priority,
    QueuelogError,
    Reported,
    Settlement,
    UserError,
)

__all__ = [
    "AsyncClient",
    "BadResponse",
    "Client",
    "ConnectionFailed",
    "Failed",
    "Job",
    "JobEvent",
    "JobPage",
    "JobProgress",
    "JobStatus",
    "Priority",
    "QueuelogError",
    "Reported",
    "Settlement",
    "UserError",
]
