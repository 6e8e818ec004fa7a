"""`queuelog enqueue` and `queuelog jobs …` against a live server, as a shell script uses them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support import LiveServer


def ql(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("QUEUELOG_")}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "queuelog.cli", *args],
        env=full, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_enqueue_list_show_cancel_retry(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type], max_priority="HIGH")
    conn = ("--url", server.url, "--key", producer)
    out = ql("enqueue", job_type, "--payload", '{"to": "a@example.com"}', "--priority", "high",
             "--idempotency-key", "once", *conn)  # fmt: skip
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.strip()
    assert job_id.isdigit()
    # The environment instead of the flags.
    environ = {"QUEUELOG_URL": server.url, "QUEUELOG_KEY": producer}
    second = ql("enqueue", job_type, "--delay", "600", **environ).stdout.strip()
    listing = ql("jobs", "list", "--type", job_type, **environ)
    assert listing.returncode == 0, listing.stderr
    rows = [line.split("\t") for line in listing.stdout.splitlines()]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (second, "PENDING", job_type),
        (job_id, "PENDING", job_type),
    ]
    shown = json.loads(ql("jobs", "show", job_id, **environ).stdout)
    assert (shown["id"], shown["payload"], shown["priority"]) == (
        job_id, {"to": "a@example.com"}, "HIGH")  # fmt: skip
    assert ql("jobs", "cancel", job_id, **environ).stdout.split() == [job_id, "CANCELLED"]
    again = ql("jobs", "cancel", job_id, **environ)
    assert again.returncode == 1 and again.stderr.startswith("error: INVALID_STATE: ")
    # retry is for admins.
    refused = ql("jobs", "retry", job_id, **environ)
    assert refused.returncode == 1 and refused.stderr.startswith("error: FORBIDDEN: ")
    admin = {"QUEUELOG_URL": server.url, "QUEUELOG_KEY": server.admin_key}
    assert ql("jobs", "retry", job_id, **admin).stdout.split() == [job_id, "PENDING"]
    pending = ql("jobs", "list", "--type", job_type, "--status", "pending", **admin).stdout
    assert len(pending.splitlines()) == 2
    missing = ql("jobs", "show", "99999999", **environ)
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr


def test_bad_input_and_an_unreachable_server(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    environ = {"QUEUELOG_URL": server.url, "QUEUELOG_KEY": producer}
    bad = ql("enqueue", job_type, "--payload", "{not json", **environ)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ")
    not_allowed = ql("enqueue", "email", **environ)
    assert not_allowed.returncode == 1
    assert not_allowed.stderr.startswith("error: JOB_TYPE_NOT_ALLOWED: ")
    down = ql("jobs", "list", "--url", "http://127.0.0.1:9/graphql", "--key", producer)
    assert down.returncode == 1 and down.stderr.startswith("error: CONNECTION_FAILED: ")
    wrong = ql("worker", "json:dumps", **environ)
    assert wrong.returncode == 2 and "not a queuelog.worker.Worker" in wrong.stderr
