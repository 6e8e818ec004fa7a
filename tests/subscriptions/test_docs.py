"""The subscriptions of graphiql.md and the README's Python listener, run for real."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.subscriptions.wsclient import claim, complete, enqueue, ws
from tests.support import ADMIN_SECRET, LiveServer

ROOT = Path(__file__).resolve().parents[2]


def graphiql_subscriptions() -> dict[str, str]:
    text = (ROOT / "graphiql.md").read_text().split("## Subscriptions in GraphiQL", 1)[1]
    blocks = re.findall(r"~~~graphql\n(.*?)~~~", text, re.S)
    return {re.search(r"subscription (\w+)", b).group(1): b for b in blocks}  # type: ignore[union-attr]


async def test_graphiql_md_subscriptions_work(quick: LiveServer) -> None:
    ops = graphiql_subscriptions()
    assert set(ops) == {"Watch", "Resume"}
    producer = quick.create_key("PRODUCER", ["email"])
    worker = quick.create_key("WORKER", ["email"])
    async with ws(quick, ADMIN_SECRET) as client:
        watch = await client.subscribe({}, ops["Watch"])
        await asyncio.sleep(0.5)  # a subscription has no acknowledgement
        job, first = enqueue(quick, producer, "email")
        event = await client.event(watch)
        assert (event["job"]["id"], event["status"]) == (job, "PENDING")
        assert claim(quick, worker, "email") == job
        complete(quick, worker, job)
        resume = ops["Resume"].replace("0000000000000001", first)
        op = await client.subscribe({}, resume)
        got = []
        while len(got) < 2:
            message = await client.receive()
            if message["id"] == op:
                got.append(message["payload"]["data"]["jobStatusChanged"]["status"])
        assert got == ["RUNNING", "COMPLETED"]


def test_readme_python_listener_works(quick: LiveServer) -> None:
    readme = (ROOT / "README.md").read_text().split("## Subscriptions", 1)[1]
    code = re.search(r"```python\n(.*?)```", readme, re.S).group(1)  # type: ignore[union-attr]
    producer = quick.create_key("PRODUCER", ["email"])
    worker = quick.create_key("WORKER", ["email"])
    job, after = enqueue(quick, producer, "email")
    env = {**os.environ, "QUEUELOG_URL": quick.url, "QUEUELOG_KEY": ADMIN_SECRET}
    listener = subprocess.Popen(
        [sys.executable, "-c", code],
        env={**env, "QUEUELOG_AFTER": after},
        stdout=subprocess.PIPE,
        text=True,
    )
    pool = ThreadPoolExecutor(1)
    try:
        assert claim(quick, worker, "email") == job
        complete(quick, worker, job)
        line = pool.submit(listener.stdout.readline).result(timeout=30)  # type: ignore[union-attr]
        assert line.split() == [job, "COMPLETED"]
    finally:
        listener.kill()
        listener.wait()
        pool.shutdown()
