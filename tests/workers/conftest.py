"""Live servers and keys for the client, worker and CLI tests.

`server` (from the root conftest) is shared by the session, one per backend: each test uses
its own job type. `own_server` is a test's own, for tests that stop or restart it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import LiveServer, live_server


@dataclass
class Keys:
    producer: str
    worker: str
    admin: str


@pytest.fixture
def keys(server: LiveServer, job_type: str) -> Keys:
    return Keys(
        server.create_key("PRODUCER", [job_type], max_priority="CRITICAL"),
        server.create_key("WORKER", [job_type]),
        server.admin_key,
    )


@pytest.fixture
def own_server(db_url: str, tmp_path: Path) -> Iterator[LiveServer]:
    with live_server(db_url, tmp_path) as live:
        yield live


def restart(server: LiveServer) -> None:
    """Stop the server and start it again on the same port and database."""
    server.stop()
    server.start()
