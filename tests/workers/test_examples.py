"""The examples in examples/, run as their README says, against a live server."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import LiveServer
from tests.workers.test_processes import wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def env(server: LiveServer, key: str, job_type: str) -> dict[str, str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("QUEUELOG_")}
    full.update(QUEUELOG_URL=server.url, QUEUELOG_KEY=key, JOB_TYPE=job_type)
    return full


def run(args: list[str], environ: dict[str, str], cwd: Path = EXAMPLES) -> str:
    out = subprocess.run(args, env=environ, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # A clean exit: no task left pending on a closed loop, no error on the way out.
    assert "Task was destroyed" not in out.stderr and "Traceback" not in out.stderr, out.stderr
    return out.stdout


def test_producer_worker_and_listener(server: LiveServer, job_type: str, tmp_path: Path) -> None:
    producer = env(server, server.create_key("PRODUCER", [job_type]), job_type)
    worker = env(server, server.create_key("WORKER", [job_type]), job_type)
    ids = run([sys.executable, "producer.py", "2"], producer).split()
    assert len(ids) == 2
    proc = subprocess.Popen(
        [sys.executable, "-m", "queuelog.cli", "worker", "worker:worker"],
        env=worker, cwd=EXAMPLES, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        wait_for(server, job_type, "COMPLETED", 2)
    finally:
        proc.send_signal(signal.SIGTERM)
        log, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and log.count(" COMPLETED (after ") == 2, log
    cursor = tmp_path / "cursor"
    cursor.write_text("0")  # replay from the beginning: this producer's jobs only
    listen = [sys.executable, "listener.py", "--cursor-file", str(cursor), "--count"]
    lines = run([*listen, "6"], producer).splitlines()
    got = sorted((line.split()[2], line.split()[4]) for line in lines)
    assert got == sorted((i, s) for i in ids for s in ("PENDING", "RUNNING", "COMPLETED"))
    assert cursor.read_text() == lines[-1].split()[0]
    # Restarted, it resumes after the stored cursor: only what came since.
    [newer] = run([sys.executable, "producer.py", "1"], producer).split()
    [line] = run([*listen, "1"], producer).splitlines()
    assert line.split()[2:] == [newer, job_type, "PENDING"]


@pytest.mark.skipif(shutil.which("npm") is None, reason="needs node and npm")
def test_node_listener(server: LiveServer, job_type: str, tmp_path: Path) -> None:
    work = tmp_path / "node-listener"
    shutil.copytree(EXAMPLES / "node-listener", work)
    install = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund"], cwd=work, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr
    key = server.create_key("PRODUCER", [job_type])
    job_id = server.gql(
        'mutation($t: String!) { enqueueJob(input: {type: $t}) { job { id } } }',
        {"t": job_type}, key,
    )["enqueueJob"]["job"]["id"]  # fmt: skip
    server.gql("mutation($id: ID!) { cancelJob(id: $id) { job { id } } }", {"id": job_id}, key)
    environ = {**env(server, key, job_type), "AFTER": "0"}
    lines = run(["node", "listener.mjs", "2"], environ, cwd=work).splitlines()
    assert [line.split()[2:] for line in lines] == [
        [job_id, job_type, "PENDING"],
        [job_id, job_type, "CANCELLED"],
    ]
