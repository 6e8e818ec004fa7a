"""V-03: anyone sets CRITICAL. A key's maxPriority (MEDIUM unless the admin says otherwise)
caps the priority it may enqueue at; admins may use any."""

from __future__ import annotations

from tests.api.attack import codes, enqueue, enqueued, snapshot
from tests.support import ADMIN_SECRET, LiveServer

LEVELS = ["LOW", "MEDIUM", "HIGH", "CRITICAL"]


def _refused(server: LiveServer, key: str, job_type: str, priority: str) -> None:
    out = enqueue(server, key, type=job_type, priority=priority)
    assert out["job"] is None and out["created"] is False, out
    assert codes(out) == ["PRIORITY_NOT_ALLOWED"], out
    assert out["userErrors"][0]["field"] == ["input", "priority"]
    assert priority in out["userErrors"][0]["message"]


def test_v03_default_producer_cannot_jump_the_queue(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type])  # default maxPriority
    viewer = server.gql("{ viewer { maxPriority } }", key=producer)["viewer"]
    assert viewer == {"maxPriority": "MEDIUM"}
    for priority in ("CRITICAL", "HIGH"):
        _refused(server, producer, job_type, priority)
    assert snapshot(server, job_type)["jobs"]["totalCount"] == 0
    for priority in ("LOW", "MEDIUM"):
        assert enqueued(server, producer, type=job_type, priority=priority)["priority"] == priority
    assert enqueued(server, producer, type=job_type)["priority"] == "LOW"


def test_v03_key_created_without_max_priority_gets_medium(server: LiveServer) -> None:
    name = server.unique_name("plain")
    out = server.gql(
        """mutation($name: String!) { createApiKey(input: {name: $name, role: PRODUCER}) {
             apiKey { maxPriority } secret } }""",
        {"name": name},
        ADMIN_SECRET,
    )["createApiKey"]
    assert out["apiKey"] == {"maxPriority": "MEDIUM"}
    assert server.gql("{ viewer { maxPriority } }", key=out["secret"])["viewer"] == {
        "maxPriority": "MEDIUM"
    }


def test_v03_allowed_up_to_the_keys_max_priority(server: LiveServer, job_type: str) -> None:
    for i, top in enumerate(LEVELS):
        producer = server.create_key("PRODUCER", [job_type], max_priority=top)
        viewer = server.gql("{ viewer { maxPriority } }", key=producer)["viewer"]
        assert viewer == {"maxPriority": top}
        for priority in LEVELS[: i + 1]:
            job = enqueued(server, producer, type=job_type, priority=priority)
            assert job["priority"] == priority
        for priority in LEVELS[i + 1 :]:
            _refused(server, producer, job_type, priority)
    assert snapshot(server, job_type)["jobs"]["totalCount"] == 1 + 2 + 3 + 4


def test_v03_admin_may_enqueue_critical(server: LiveServer, job_type: str) -> None:
    assert server.gql("{ viewer { maxPriority } }", key=ADMIN_SECRET)["viewer"] == {
        "maxPriority": "CRITICAL"
    }
    assert enqueued(server, ADMIN_SECRET, type=job_type, priority="CRITICAL")["priority"] == (
        "CRITICAL"
    )


def test_v03_one_critical_job_refuses_the_whole_batch(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    out = server.gql(
        """mutation($inputs: [EnqueueJobInput!]!) {
             enqueueJobs(inputs: $inputs) { jobs { id } userErrors { code field } } }""",
        {"inputs": [{"type": job_type}, {"type": job_type, "priority": "CRITICAL"}]},
        producer,
    )["enqueueJobs"]
    assert out == {
        "jobs": [],
        "userErrors": [{"code": "PRIORITY_NOT_ALLOWED", "field": ["inputs", "1", "priority"]}],
    }
    assert snapshot(server, job_type)["jobs"]["totalCount"] == 0
