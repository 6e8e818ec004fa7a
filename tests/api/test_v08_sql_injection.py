"""V-08: SQL injection. Every value reaches the database as a bound parameter: SQL
metacharacters in payloads, idempotency keys, error texts, key names and filters are stored
and returned as literal text, and every table stays intact."""

from __future__ import annotations

from tests.api.attack import (
    FAIL,
    JOB,
    admin_job,
    api_keys,
    claim,
    enqueue,
    enqueued,
    snapshot,
    top_level_codes,
)
from tests.support import ADMIN_SECRET, LiveServer

INJECTIONS = [
    "'; DROP TABLE jobs; --",
    '" OR 1=1 --',
    "1); DELETE FROM api_keys; --",
    "Robert'); DROP TABLE job_events;--",
    "' UNION SELECT name FROM api_keys --",
    "%_\\ $1 :name ? ::text /* */",
]


def _tables_intact(server: LiveServer) -> None:
    data = server.gql(
        "{ jobs(first: 1) { totalCount nodes { events { status } } } apiKeys { name } }",
        key=ADMIN_SECRET,
    )
    assert data["jobs"]["totalCount"] > 0
    assert data["jobs"]["nodes"][0]["events"]
    assert "admin" in {k["name"] for k in data["apiKeys"]}


def test_v08_payload_and_idempotency_key_stored_literally(
    server: LiveServer, job_type: str
) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    for i, text in enumerate(INJECTIONS):
        payload = {"q": text, text: [text, {"nested": text}], "n": i}
        key = f"{text}#{i}"
        job = enqueued(server, producer, type=job_type, payload=payload, idempotencyKey=key)
        assert job["payload"] == payload and job["idempotencyKey"] == key
        again = enqueue(server, producer, type=job_type, payload=payload, idempotencyKey=key)
        assert again["created"] is False and again["job"]["id"] == job["id"]
        read = server.gql(JOB, {"id": job["id"]}, producer)["job"]
        assert read["payload"] == payload and read["idempotencyKey"] == key
    assert snapshot(server, job_type)["jobs"]["totalCount"] == len(INJECTIONS)
    _tables_intact(server)


def test_v08_error_text_stored_literally(server: LiveServer, job_type: str) -> None:
    worker = server.create_key("WORKER", [job_type])
    for text in INJECTIONS:
        job = enqueued(server, ADMIN_SECRET, type=job_type, maxRetries=0)
        assert claim(server, worker, [job_type])["job"]["id"] == job["id"]
        out = server.gql(FAIL, {"id": job["id"], "error": text, "retryable": False}, worker)
        assert out["failJob"]["job"]["status"] == "FAILED"
        assert admin_job(server, job["id"])["error"] == text
    _tables_intact(server)


def test_v08_key_names_stored_literally(server: LiveServer, job_type: str) -> None:
    for i, text in enumerate(INJECTIONS):
        name = f"{text} {server.unique_name('w')}"
        worker = server.create_key("WORKER", [job_type], name=name)
        assert server.gql("{ viewer { name } }", key=worker)["viewer"]["name"] == name
        job = enqueued(server, ADMIN_SECRET, type=job_type, payload={"i": i})
        claimed = claim(server, worker, [job_type])["job"]
        assert claimed["id"] == job["id"] and claimed["workerId"] == name
        assert name in api_keys(server)
    # A revoke aimed at every key by a SQL condition revokes nothing.
    before = api_keys(server)
    for text in ("' OR '1'='1", "admin' --", "%", "admin\x00"):
        out = server.gql(
            "mutation($n: String!) { revokeApiKey(name: $n) }", {"n": text}, ADMIN_SECRET
        )
        assert out == {"revokeApiKey": False}
    assert api_keys(server) == before
    _tables_intact(server)


def test_v08_filters_and_ids_are_literal(server: LiveServer, job_type: str) -> None:
    enqueued(server, ADMIN_SECRET, type=job_type)
    for text in [*INJECTIONS, "' OR '1'='1", "%", "email\n"]:
        data = server.gql(
            """query($t: String!) {
                 jobs(type: $t) { totalCount } queueStats(type: $t) { pending running } }""",
            {"t": text},
            ADMIN_SECRET,
        )
        assert data == {"jobs": {"totalCount": 0}, "queueStats": {"pending": 0, "running": 0}}
        assert server.gql(JOB, {"id": text}, ADMIN_SECRET) == {"job": None}
        resp = server.post(
            "query($a: String) { jobs(after: $a) { totalCount } }", {"a": text}, ADMIN_SECRET
        )
        assert top_level_codes(resp.json()) == ["BAD_USER_INPUT"], resp.text
    assert server.gql(JOB, {"id": "1 OR 1=1"}, ADMIN_SECRET) == {"job": None}
    # NUL, which no stored text holds, is refused as input (tests/security/test_input_text.py).
    for text in ("email\x00", "\x00"):
        resp = server.post(
            "query($t: String!) { jobs(type: $t) { totalCount } }", {"t": text}, ADMIN_SECRET
        )
        assert top_level_codes(resp.json()) == ["BAD_USER_INPUT"], resp.text
    _tables_intact(server)
