from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from queuelog.config import Settings
from tests.support import BACKENDS, LiveServer, session_server

# Short protocol timers, a one-event window (so that the table is read, not memory), and a
# quick re-check of keys: what the production defaults make slow to observe.
QUICK: dict[str, object] = {
    "ws_init_timeout_seconds": 0.5,
    "ws_ping_interval_seconds": 0.2,
    "key_recheck_seconds": 0.5,
    "max_subscriptions_per_connection": 3,
    "event_window": 1,
}


@pytest.fixture
def settings(db_url: str) -> Settings:
    """For the in-process server (`live`): hundreds of subscriptions from one key within
    seconds, which the per-key rate limit (WebSocket operations spend it too) would refuse."""
    return Settings(
        database_url=db_url, job_types=("email", "pdf", "sync"), rate_limit_per_second=0
    )


@pytest.fixture(scope="session", params=BACKENDS)
def quick(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    yield from session_server(
        tmp_path_factory, str(request.param), f"quick-{request.param}", **QUICK
    )


def cli(server: LiveServer, *args: str, **env: str) -> str:
    """Run `queuelog …` as another process on the server's database."""
    out = subprocess.run(
        [sys.executable, "-m", "queuelog.cli", *args],
        env={**os.environ, **server.env(), **env},
        cwd=server.workdir,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout
