"""Two `queuelog serve` processes on one database see each other's changes (PostgreSQL:
LISTEN/NOTIFY with polling behind it; SQLite: polling)."""

from __future__ import annotations

from tests.subscriptions.wsclient import claim, complete, enqueue, ws
from tests.support import ADMIN_SECRET, LiveServer


async def test_two_servers_see_each_other_s_changes(
    server: LiveServer, sibling: LiveServer, job_type: str
) -> None:
    a, b = server, sibling
    producer = a.create_key("PRODUCER", [job_type])
    worker = a.create_key("WORKER", [job_type])
    _, start = enqueue(a, producer, job_type)
    async with ws(a, ADMIN_SECRET) as on_a, ws(b, ADMIN_SECRET) as on_b:
        op_a = await on_a.subscribe({"type": job_type, "after": start})
        op_b = await on_b.subscribe({"type": job_type, "after": start})
        job, _ = enqueue(b, producer, job_type)  # written by b: a hears it
        claim(a, worker, job_type)  # the marker, written by a: b hears it
        assert claim(b, worker, job_type) == job
        complete(a, worker, job)
        heard_a = await on_a.events(op_a, 4)
        heard_b = await on_b.events(op_b, 4)
    assert heard_a == heard_b
    assert [(e["job"]["id"], e["status"]) for e in heard_a][-1] == (job, "COMPLETED")
