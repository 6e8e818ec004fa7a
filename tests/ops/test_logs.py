"""QUEUELOG_LOG_FORMAT=json: one JSON object per line, each line of a request carrying its
id, its operation and its key's name, and never a secret, a payload or a job's error."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from queuelog.edge.logs import CURRENT, JsonFormatter, RequestInfo
from tests.support import ADMIN_SECRET, LiveServer, free_port

PAYLOAD_MARK = "payload-mark-7d1f"
ERROR_MARK = "job-error-mark-91c2"
ENQUEUE = (
    'mutation Produce { enqueueJob(input: {type: "email", payload: {secret: "'
    + PAYLOAD_MARK
    + '"}}) { job { id } } }'
)


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    """What the server's loggers write, through the JSON formatter."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    loggers = [logging.getLogger(n) for n in ("uvicorn.access", "queuelog")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
    yield out
    for lg, level in zip(loggers, levels, strict=True):
        lg.removeHandler(handler)
        lg.setLevel(level)


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_each_line_of_a_request_names_its_id_operation_and_key(
    live: tuple[LiveServer, str], json_lines: io.StringIO
) -> None:
    server, key = live
    async with httpx.AsyncClient() as client:
        headers = {"Authorization": f"Bearer {key}", "X-Request-Id": "req-42"}
        response = await client.post(server.url, json={"query": ENQUEUE}, headers=headers)
        job_id = response.json()["data"]["enqueueJob"]["job"]["id"]
        for query in (
            'mutation { claimJob(types: ["email"]) { job { id } } }',
            f'mutation {{ failJob(id: "{job_id}", error: "{ERROR_MARK}") {{ willRetry }} }}',
        ):
            await client.post(server.url, json={"query": query}, headers=headers)
        await client.get(f"{server.url}?query={{queueStats{{pending}}}}&variables={{}}")
    text = json_lines.getvalue()
    lines = [orjson.loads(line) for line in text.splitlines()]
    access = [line for line in lines if line["logger"] == "uvicorn.access"]
    assert len(access) == 4
    first = access[0]
    assert first["request_id"] == "req-42" and response.headers["x-request-id"] == "req-42"
    assert first["operation"] == "enqueueJob" and first["key"] == "admin"
    assert first["method"] == "POST" and first["path"] == "/graphql" and first["status"] == 200
    assert [a["operation"] for a in access] == ["enqueueJob", "claimJob", "failJob", "queueStats"]
    assert access[3]["key"] is None and access[3]["path"] == "/graphql"  # no query string
    for mark in (key, PAYLOAD_MARK, ERROR_MARK, "variables"):
        assert mark not in text


def test_a_fault_logs_its_traceback_and_the_request() -> None:
    scope = {"type": "http", "state": {"request_id": "r-1"}}
    token = CURRENT.set(RequestInfo(scope))
    try:
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            record = logging.LogRecord(
                "queuelog.errors", logging.ERROR, __file__, 1, "unexpected %s", ("error",),
                sys.exc_info(),
            )  # fmt: skip
        entry = orjson.loads(JsonFormatter().format(record))
    finally:
        CURRENT.reset(token)
    assert entry["message"] == "unexpected error" and entry["level"] == "error"
    assert entry["request_id"] == "r-1" and entry["key"] is None
    assert "RuntimeError: boom" in entry["traceback"]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_queuelog_serve_writes_json_lines(tmp_path: Path, db_url: str) -> None:
    """`queuelog serve` with QUEUELOG_LOG_FORMAT=json: every line of its log is a JSON
    object (its one-time printouts go to stdout)."""
    port = free_port()
    env = dict(
        os.environ,
        QUEUELOG_DATABASE_URL=db_url,
        QUEUELOG_ADMIN_KEY=ADMIN_SECRET,
        QUEUELOG_LOG_FORMAT="json",
    )
    cmd = [sys.executable, "-m", "queuelog.cli", "serve", "--port", str(port)]
    stderr = tmp_path / "stderr.log"
    with open(stderr, "wb") as err:
        proc = subprocess.Popen(
            [*cmd, "--log-level", "info"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
            stderr=err,
        )  # fmt: skip
        try:
            server = LiveServer(db_url, tmp_path, port=port)
            for _ in range(300):
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(server.url.replace("/graphql", "/healthz")).is_success:
                        break
                time.sleep(0.1)
            server.gql(ENQUEUE, key=ADMIN_SECRET)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(15)
    lines = [orjson.loads(line) for line in stderr.read_text().splitlines()]
    assert any(line.get("operation") == "enqueueJob" for line in lines)
    assert any(line["logger"].startswith("uvicorn") and "request_id" not in line for line in lines)
    assert PAYLOAD_MARK not in stderr.read_text()
