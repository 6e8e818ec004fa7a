"""`jobTypes.oldestPendingAt` through a live server, on SQLite and PostgreSQL: it reads only
the jobs the viewer may see, and only those due, so a producer learns nothing of another
producer's jobs (not even when a delayed one will run)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tests.support import LiveServer

OLDEST = "{ jobTypes { name oldestPendingAt stats { pending } } }"
ENQUEUE = """mutation($i: EnqueueJobInput!) { enqueueJob(input: $i) {
  job { id runAt } userErrors { code } } }"""


def enqueue(server: LiveServer, key: str, **fields: Any) -> dict[str, Any]:
    out = server.gql(ENQUEUE, {"i": fields}, key)["enqueueJob"]
    assert out["userErrors"] == [], out
    return dict(out["job"])


def oldest(server: LiveServer, key: str, name: str) -> datetime | None:
    (found,) = [t for t in server.gql(OLDEST, None, key)["jobTypes"] if t["name"] == name]
    at = found["oldestPendingAt"]
    return None if at is None else datetime.fromisoformat(at)


def test_oldest_pending_at_reads_only_the_viewer_s_due_jobs(
    server: LiveServer, job_type: str
) -> None:
    alice = server.create_key("PRODUCER", [job_type])
    bob = server.create_key("PRODUCER", [job_type])
    worker = server.create_key("WORKER", [job_type])
    viewer = server.create_key("VIEWER")

    # Only a delayed job waits: nobody is shown its runAt, not even its own producer.
    enqueue(server, bob, type=job_type, delaySeconds=3600)
    for key in (alice, bob, worker, viewer, server.admin_key):
        assert oldest(server, key, job_type) is None

    # Bob's due job: Bob, the viewer and the admin see it; Alice and the worker do not.
    due = enqueue(server, bob, type=job_type)
    at = datetime.fromisoformat(due["runAt"])
    assert oldest(server, bob, job_type) == at
    assert oldest(server, viewer, job_type) == at
    assert oldest(server, server.admin_key, job_type) == at
    assert oldest(server, alice, job_type) is None
    assert oldest(server, worker, job_type) is None

    # Alice's own due job is what she sees; the others still see Bob's, the older.
    mine = enqueue(server, alice, type=job_type, priority="LOW")
    assert oldest(server, alice, job_type) == datetime.fromisoformat(mine["runAt"])
    assert oldest(server, bob, job_type) == at
    assert oldest(server, server.admin_key, job_type) == at
