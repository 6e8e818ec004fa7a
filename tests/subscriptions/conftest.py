from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.inprocess import live, settings  # noqa: F401  (fixtures)
from tests.support import BACKENDS, LiveServer, database_url

# Short protocol timers, a one-event window (so that the table is read, not memory), and a
# quick re-check of keys: what the production defaults make slow to observe.
QUICK = {
    "QUEUELOG_WS_INIT_TIMEOUT_SECONDS": "0.5",
    "QUEUELOG_WS_PING_INTERVAL_SECONDS": "0.2",
    "QUEUELOG_KEY_RECHECK_SECONDS": "0.5",
    "QUEUELOG_MAX_SUBSCRIPTIONS_PER_CONNECTION": "3",
    "QUEUELOG_EVENT_WINDOW": "1",
}


@pytest.fixture(scope="session", params=BACKENDS)
def quick(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp(f"quick-{request.param}")
    with database_url(str(request.param), tmp) as url:
        live = LiveServer(url, tmp, env_extra=dict(QUICK)).start()
        try:
            yield live
        finally:
            live.stop()


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
