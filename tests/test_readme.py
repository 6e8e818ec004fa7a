"""The README: its shell examples run against a fresh live server, so they cannot go stale;
it links nothing outside the repository and stays short."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.support import LiveServer

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def section_block(heading: str) -> str:
    """The first ```sh block under a README heading."""
    part = README.split(f"## {heading}\n", 1)[1]
    return re.search(r"```sh\n(.*?)```", part, re.S).group(1)  # type: ignore[union-attr]


def run(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # `.venv/bin/queuelog` in the README is this interpreter's queuelog.
    script = script.replace(".venv/bin/queuelog", f"{sys.executable} -m queuelog.cli")
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_readme_examples(start_server: Callable[..., LiveServer]) -> None:
    server = start_server()
    env = {**os.environ, **server.env()}
    first = run(section_block("First steps"), env)
    assert first.returncode == 0, first.stderr
    assert "web\tproducer\temail,pdf\thigh\tlive" in first.stdout
    assert "revoked 'mailer-1'" in first.stdout

    secrets = {}
    for role in ("producer", "worker"):
        made = run(
            f".venv/bin/queuelog keys create --name ex-{role} --role {role} --max-priority high",
            env,
        )
        assert made.returncode == 0, made.stderr
        secrets[role] = made.stdout.strip().splitlines()[-1]
    curl = section_block("A worked example with curl").replace(
        "127.0.0.1:8000", f"127.0.0.1:{server.port}"
    )
    env.update(PRODUCER_SECRET=secrets["producer"], WORKER_SECRET=secrets["worker"])
    done = run(curl, env)
    assert done.returncode == 0, done.stderr

    answers = [json.loads(line) for line in done.stdout.replace("}{", "}\n{").splitlines()]
    assert len(answers) == 4 and all("errors" not in a for a in answers), answers
    enqueued, claimed, completed, seen = (a["data"] for a in answers)
    assert enqueued["enqueueJob"]["created"] is True, enqueued
    assert claimed["claimJob"]["job"]["id"] == "1"
    assert completed["completeJob"]["job"]["status"] == "COMPLETED"
    assert [e["status"] for e in seen["job"]["events"]] == ["PENDING", "RUNNING", "COMPLETED"]

    # The REST section goes on from there, with the same keys and variables.
    rest = section_block("The same over REST").replace("127.0.0.1:8000", f"127.0.0.1:{server.port}")
    prelude = "\n".join(curl.splitlines()[:2])  # P= and W=
    done = run(prelude + "\n" + rest, env)
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.replace("}{", "}\n{").splitlines()]
    made, held, finished, read, listed = answers
    assert made["id"] == held["id"] == finished["id"] == read["id"] == 2, answers
    assert made["priority"] == "high" and finished["status"] == "completed"
    assert [j["id"] for j in listed["jobs"]] == [2, 1], listed


def test_the_readme_links_only_inside_the_repository() -> None:
    assert "../" not in README
    for target in re.findall(r"\]\(([^)\s]+)\)", README):
        if re.match(r"https?://", target):
            continue
        path = (ROOT / target.split("#", 1)[0]).resolve()
        assert path.is_relative_to(ROOT) and path.exists(), target


def test_the_readme_stays_short() -> None:
    assert len(README.splitlines()) < 340
