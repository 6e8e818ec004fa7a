"""`queuelog enqueue` and `queuelog jobs …` against a live server, as a shell script uses them.

The first command of each test runs as a process of its own (`python -m queuelog.cli`); the
others run `queuelog.cli.main` in the test's process, with the same arguments, environment,
output and exit status, as each process costs the whole import of the package."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys

import pytest

from queuelog.cli import main as cli
from tests.support import LiveServer

_spawned: set[str] = set()


def ql(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("QUEUELOG_")}
    full.update(env)
    test = os.environ.get("PYTEST_CURRENT_TEST", "")
    if test not in _spawned:
        _spawned.add(test)
        return subprocess.run(
            [sys.executable, "-m", "queuelog.cli", *args],
            env=full, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    return _in_process(list(args), full)


def _in_process(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    out, err = io.StringIO(), io.StringIO()
    with (
        pytest.MonkeyPatch.context() as m,
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        for name in [k for k in os.environ if k.startswith("QUEUELOG_")]:
            m.delenv(name)
        for name, value in env.items():
            if name.startswith("QUEUELOG_"):
                m.setenv(name, value)
        try:
            code = cli.main(args)
        except SystemExit as exc:  # argparse's refusals
            code = exc.code if isinstance(exc.code, int) else 2
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


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
