"""V-10: error leakage. Worker error texts are sanitized before they are stored (credentials,
tokens and DSN passwords redacted, length capped) and only admins can read them."""

from __future__ import annotations

from tests.api.attack import FAIL, JOB, admin_job, claim, enqueued
from tests.support import ADMIN_SECRET, LiveServer

SECRETS = {
    "dsn": (
        "psycopg.OperationalError: connection to postgresql://app:hunter2@db:5432/prod failed",
        "hunter2",
    ),
    "bearer": (
        "401 from billing: sent 'Authorization: Bearer sk9f8a7d6s5a4d3f2g1h' upstream",
        "sk9f8a7d6s5a4d3f2g1h",
    ),
    "password": (
        "login failed for smtp user=mailer password=Pa55w0rd! host=smtp.internal",
        "Pa55w0rd!",
    ),
    "api key": ("config: api_key: 'AbCdEf0123456789' rejected", "AbCdEf0123456789"),
    "queuelog key": (
        "retry with ql_abcdefghijklmnopqrstuvwxyz0123456789",
        "ql_abcdefghijklmnopqrstuvwxyz0123456789",
    ),
}


def _failed(server: LiveServer, worker: str, job_type: str, error: str) -> dict[str, str]:
    job = enqueued(server, ADMIN_SECRET, type=job_type, maxRetries=0)
    assert claim(server, worker, [job_type])["job"]["id"] == job["id"]
    out = server.gql(FAIL, {"id": job["id"], "error": error, "retryable": False}, worker)
    assert out["failJob"]["userErrors"] == [] and out["failJob"]["job"]["status"] == "FAILED"
    return dict(out["failJob"]["job"])


def test_v10_secrets_redacted_before_storage(server: LiveServer, job_type: str) -> None:
    worker = server.create_key("WORKER", [job_type])
    for what, (error, secret) in SECRETS.items():
        job = _failed(server, worker, job_type, error)
        stored = admin_job(server, job["id"])["error"]
        assert secret not in stored, (what, stored)
        assert "[REDACTED]" in stored, (what, stored)
    # What is not a secret stays readable.
    job = _failed(server, worker, job_type, SECRETS["dsn"][0])
    assert admin_job(server, job["id"])["error"].startswith("psycopg.OperationalError")


def test_v10_error_length_capped(server: LiveServer, job_type: str) -> None:
    worker = server.create_key("WORKER", [job_type])
    job = _failed(server, worker, job_type, "Traceback line\n" * 20_000)
    stored = admin_job(server, job["id"])["error"]
    assert 100 < len(stored) <= 2_000
    assert stored.endswith("[truncated]")


def test_v10_error_readable_by_admins_only(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    first = server.create_key("WORKER", [job_type])
    second = server.create_key("WORKER", [job_type])
    job = enqueued(server, producer, type=job_type, maxRetries=1)
    claimed = claim(server, first, [job_type])["job"]
    out = server.gql(FAIL, {"id": job["id"], "error": "disk /srv/data full"}, first)["failJob"]
    assert out["willRetry"] is True and out["job"]["error"] is None

    assert admin_job(server, job["id"])["error"] == "disk /srv/data full"
    for key in (producer, first):
        assert server.gql(JOB, {"id": job["id"]}, key)["job"]["error"] is None
        nodes = server.gql("{ jobs { nodes { id error } } }", key=key)["jobs"]["nodes"]
        assert {"id": job["id"], "error": None} in nodes
    # The next worker to hold the job does not read its predecessor's error either.
    cancelled = server.gql(
        "mutation($id: ID!) { cancelJob(id: $id) { job { status } } }",
        {"id": job["id"]},
        ADMIN_SECRET,
    )
    assert cancelled["cancelJob"]["job"]["status"] == "CANCELLED"
    server.gql(
        "mutation($id: ID!) { retryJob(id: $id) { job { status } } }",
        {"id": job["id"]},
        ADMIN_SECRET,
    )
    again = claim(server, second, [job_type])["job"]
    assert again["id"] == claimed["id"] and again["error"] is None
    assert admin_job(server, job["id"])["error"] == "disk /srv/data full"
