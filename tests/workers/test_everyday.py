"""Everyday use of the SDK and the client commands against a live server, on both backends:
what a handler reads on its job, payloads that are not objects, CLI errors that name the
option to change, paging `jobs list`, and the worker's log line."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from queuelog.client import AsyncClient, Client, JobStatus, UserError
from queuelog.worker import RunningJob, Worker
from tests.support import LiveServer
from tests.workers.conftest import Keys
from tests.workers.helpers import settled, until, working
from tests.workers.test_cli_client import ql
from tests.workers.test_worker import enqueue

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
NOT_OBJECTS: list[Any] = [[1], [["to", "x@example.com"]], "abc", 3, True]
ENQUEUE = """mutation($p: JSON) { enqueueJob(input: {type: "%s", payload: $p}) {
  job { id } userErrors { code message field } } }"""


def _listed_attributes() -> list[str]:
    """The attributes README's worker example says a job has (`# job.id, .type, …`)."""
    [line] = [line for line in README.splitlines() if "# job.id," in line]
    return [a.strip().lstrip(".") for a in line.split("# job.", 1)[1].split(",")]


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_careful_handler_that_checks_cancelled_runs_to_the_end(
    server: LiveServer, keys: Keys, job_type: str, kind: str
) -> None:
    """`if job.cancelled:` reads False while nothing asked the handler to stop, and every
    attribute the README lists is what it says."""
    worker = Worker(server.url, keys.worker)
    seen: dict[str, Any] = {}

    def work(job: RunningJob) -> Any:
        seen.update({name: getattr(job, name) for name in _listed_attributes()})
        if job.cancelled:
            return {"done": "partly"}
        return {"done": "all"}

    if kind == "async":

        @worker.handler(job_type)
        async def run_async(job: RunningJob) -> Any:
            return work(job)

    else:
        worker.handler(job_type)(work)

    [job_id] = await enqueue(server, keys.producer, job_type, {"n": 1})
    async with working(worker):
        [job] = await settled(server, [job_id])
    assert (job.status, job.result) == (JobStatus.COMPLETED, {"done": "all"})
    assert _listed_attributes() == ["id", "type", "payload", "retry_count", "cancelled"]
    assert seen == {
        "id": job_id,
        "type": job_type,
        "payload": {"n": 1},
        "retry_count": 0,
        "cancelled": False,
    }


def test_cancelled_reads_true_once_the_handler_should_stop(
    server: LiveServer, keys: Keys, job_type: str
) -> None:
    with Client(server.url, keys.producer) as client:
        running = RunningJob(client.enqueue(job_type))
    assert running.cancelled is False and running.wait_cancelled(0) is False
    running.cancelled_event.set()  # as the worker does on a cancel, a lost lease, a stop
    assert running.cancelled is True and running.wait_cancelled(0) is True


async def test_payloads_that_are_not_objects_are_refused_before_they_leave(
    server: LiveServer, keys: Keys, job_type: str
) -> None:
    refused = server.gql(ENQUEUE % job_type, {"p": [1]}, keys.producer)["enqueueJob"]
    [server_error] = refused["userErrors"]
    with Client(server.url, keys.producer) as client:
        for payload in NOT_OBJECTS:
            with pytest.raises(UserError) as sync_error:
                client.enqueue(job_type, payload)
            assert sync_error.value.code == server_error["code"] == "VALIDATION_FAILED"
            assert sync_error.value.message == server_error["message"]
            assert sync_error.value.field == server_error["field"]
        with pytest.raises(UserError):
            client.enqueue_many([{"type": job_type, "payload": [["to", "x"]]}])
    async with AsyncClient(server.url, keys.producer) as aclient:
        for payload in NOT_OBJECTS:
            with pytest.raises(UserError) as async_error:
                await aclient.enqueue(job_type, payload)
            assert async_error.value.message == "payload must be a JSON object"
        assert (await aclient.jobs(type=job_type)).jobs == []  # nothing was sent


def test_the_cli_refuses_payloads_that_are_not_objects(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    environ = {"QUEUELOG_URL": server.url, "QUEUELOG_KEY": producer}
    for text in ("[1]", '[["to","x@example.com"]]', '"abc"', "3", "null"):
        out = ql("enqueue", job_type, "--payload", text, **environ)
        assert out.returncode == 2, (text, out.stderr)
        assert "--payload" in out.stderr and "payload must be a JSON object" in out.stderr
        assert "Traceback" not in out.stderr
    bad = ql("enqueue", job_type, "--payload", "{to: 1}", **environ)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --payload is not JSON")
    assert ql("jobs", "list", "--type", job_type, **environ).stdout == ""


def test_cli_errors_name_the_option_that_fixes_them(
    server: LiveServer, job_type: str, tmp_path: Path
) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    no_key = ql("enqueue", job_type, "--url", server.url)
    assert no_key.returncode == 1 and "UNAUTHENTICATED" in no_key.stderr
    assert "--key" in no_key.stderr and "QUEUELOG_KEY" in no_key.stderr
    assert "Authorization" not in no_key.stderr

    wrong_key = ql("jobs", "list", "--url", server.url, "--key", "ql_wrong_key_0123456789")
    assert wrong_key.returncode == 1 and "--key or QUEUELOG_KEY" in wrong_key.stderr

    root = server.url.removesuffix("/graphql")
    for url in (root, root + "/"):
        lost = ql("jobs", "list", "--url", url, "--key", producer)
        assert lost.returncode == 1 and "--url or QUEUELOG_URL" in lost.stderr, lost.stderr
        assert "/graphql" in lost.stderr and "Traceback" not in lost.stderr

    down = ql("jobs", "list", "--url", "http://127.0.0.1:9/graphql", "--key", producer)
    assert down.returncode == 1 and "--url or QUEUELOG_URL" in down.stderr

    unconfigured = ql("enqueue", "report", "--url", server.url, "--key", server.admin_key)
    assert unconfigured.returncode == 1 and "QUEUELOG_JOB_TYPES" in unconfigured.stderr
    assert "job_types" in unconfigured.stderr

    too_high = ql("enqueue", job_type, "--priority", "CRITICAL", "--url", server.url,
                  "--key", producer)  # fmt: skip
    assert too_high.returncode == 1 and "--priority" in too_high.stderr

    missing = ql("worker", "no_such_module:worker", "--url", server.url, "--key", producer)
    assert missing.returncode == 2 and "PYTHONPATH" in missing.stderr
    assert "Traceback" not in missing.stderr


WORKER_MODULE = """
from queuelog.worker import Worker

worker = Worker(wait_seconds=1)

@worker.handler({mine!r})
async def mine(job):
    return None

@worker.handler({other!r})
async def other(job):
    return None
"""


def test_a_worker_whose_key_lacks_a_handler_s_type_is_told_about_types(
    server: LiveServer, job_type: str, other_job_type: str, tmp_path: Path
) -> None:
    key = server.create_key("WORKER", [job_type])
    (tmp_path / "both.py").write_text(
        textwrap.dedent(WORKER_MODULE.format(mine=job_type, other=other_job_type))
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUEUELOG_")}
    out = subprocess.run(
        [sys.executable, "-m", "queuelog.cli", "worker", "both:worker",
         "--url", server.url, "--key", key],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 1 and "JOB_TYPE_NOT_ALLOWED" in out.stderr, out.stderr
    assert "--types" in out.stderr

    none = subprocess.run(
        [sys.executable, "-m", "queuelog.cli", "worker", "both:worker", "--types", "nothing",
         "--url", server.url, "--key", key],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert none.returncode == 2 and "--types" in none.stderr and job_type in none.stderr


def test_jobs_list_pages_with_after_and_takes_statuses_in_any_case(
    server: LiveServer, job_type: str
) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    environ = {"QUEUELOG_URL": server.url, "QUEUELOG_KEY": producer}
    with Client(server.url, producer) as client:
        ids = [client.enqueue(job_type, {"n": i}).id for i in range(5)]
        client.cancel(ids[0])
    seen: list[str] = []
    args = ["jobs", "list", "--type", job_type, "--limit", "2"]
    for _ in range(5):
        page = ql(*args, **environ)
        assert page.returncode == 0, page.stderr
        seen += [line.split("\t")[0] for line in page.stdout.splitlines()]
        more = re.search(r"--after (\S+)\)", page.stderr)
        if more is None:
            break
        assert f"queuelog jobs list --type {job_type} --limit 2 --after" in page.stderr
        args = ["jobs", "list", "--type", job_type, "--limit", "2", "--after", more.group(1)]
    assert seen == ids[::-1]
    for option, bad in (("--limit", "0"), ("--after", "garbage")):
        refused = ql("jobs", "list", option, bad, **environ)
        assert refused.returncode == 1 and f"hint: check {option}" in refused.stderr
    for spelling in ("CANCELLED", "cancelled", "Cancelled"):
        out = ql("jobs", "list", "--type", job_type, "--status", spelling, **environ)
        assert out.returncode == 0, out.stderr
        assert [line.split("\t")[:2] for line in out.stdout.splitlines()] == [[ids[0], "CANCELLED"]]


async def test_the_worker_log_says_how_long_the_attempt_took(
    server: LiveServer, keys: Keys, job_type: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "queuelog.worker")
    worker = Worker(server.url, keys.worker)

    @worker.handler(job_type)
    async def fail(job: RunningJob) -> None:
        raise ValueError("try again")

    [job_id] = await enqueue(server, keys.producer, job_type, {}, max_retries=1)
    async with working(worker):
        await settled(server, [job_id], lambda j: j.retry_count >= 1)
        await until(lambda: any(m.startswith(f"job {job_id} ") for m in caplog.messages))
    [line, *_] = [m for m in caplog.messages if m.startswith(f"job {job_id} ")]
    assert re.fullmatch(
        rf"job {job_id} {job_type} FAILED, will retry \(after \d+\.\d{{3}}s\): "
        r"ValueError: try again",
        line,
    ), line
