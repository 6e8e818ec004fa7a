"""Payloads through a live server, on both backends (jsonb on PostgreSQL, text on SQLite):
they come back as the same JSON from every read, a repeated enqueue is recognized whatever
its key order, payloadContains selects the same jobs for a list and a bulk action, and a
NUL character, which jsonb cannot hold, is refused on both."""

from __future__ import annotations

from tests.api.attack import JOB, claim, codes, enqueue, enqueued, top_level_codes
from tests.dashboard_api.test_bulk import CANCEL_JOBS
from tests.dashboard_api.test_job_filter import JOBS
from tests.support import ADMIN_SECRET, LiveServer

PAYLOAD = {
    "zeta": [3, 1.5, -2, 2**63, 2**64 - 1, -(2**63), 1e-7, True, None],
    "alpha": {"nested": {"b": "x", "a": ["é", "日本", "\\u0000", 'tab\t"quote"']}},
    "": "empty key",
    "long key that sorts last in jsonb": 0.1,
}
LIST = "query($filter: JobFilter) { jobs(filter: $filter) { nodes { id payload } } }"


def test_a_payload_comes_back_as_sent_from_every_read(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    worker = server.create_key("WORKER", [job_type])
    made = enqueued(server, producer, type=job_type, payload=PAYLOAD)
    assert made["payload"] == PAYLOAD
    assert server.gql(JOB, {"id": made["id"]}, producer)["job"]["payload"] == PAYLOAD
    listed = server.gql(LIST, {"filter": {"types": [job_type]}}, ADMIN_SECRET)["jobs"]["nodes"]
    assert listed == [{"id": made["id"], "payload": PAYLOAD}]
    claimed = server.gql(
        "mutation($t: [String!]) { claimJob(types: $t) { job { id payload } } }",
        {"t": [job_type]},
        worker,
    )["claimJob"]["job"]
    assert claimed == {"id": made["id"], "payload": PAYLOAD}


def test_a_repeated_enqueue_is_recognized_whatever_its_key_order(
    server: LiveServer, job_type: str
) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    first = enqueued(server, producer, type=job_type, payload=PAYLOAD, idempotencyKey="same")
    reordered = dict(reversed(list(PAYLOAD.items())))
    again = enqueue(server, producer, type=job_type, payload=reordered, idempotencyKey="same")
    assert (again["created"], again["userErrors"]) == (False, [])
    assert again["job"]["id"] == first["id"] and again["job"]["payload"] == PAYLOAD
    other = enqueue(server, producer, type=job_type, payload={"x": 1}, idempotencyKey="same")
    assert codes(other) == ["IDEMPOTENCY_KEY_REUSED"]


def test_payload_contains_selects_alike_for_a_list_and_a_bulk_action(
    server: LiveServer, job_type: str
) -> None:
    payloads = [{"customer": n % 3, "plan": {"tier": "pro" if n % 2 else "free"}} for n in range(6)]
    made = [enqueued(server, ADMIN_SECRET, type=job_type, payload=p)["id"] for p in payloads]
    wanted = {"types": [job_type], "payloadContains": {"customer": 1, "plan": {"tier": "pro"}}}
    found = server.gql(JOBS, {"filter": wanted}, ADMIN_SECRET)["jobs"]
    assert [n["id"] for n in found["nodes"]] == [made[1]]  # n = 1 (n = 4 is free)
    assert found["totalCount"] == 1
    wide = {"types": [job_type], "payloadContains": {"plan": {"tier": "pro"}}}
    cancelled = server.gql(CANCEL_JOBS, {"filter": wide, "limit": 10}, ADMIN_SECRET)
    assert cancelled["cancelJobs"]["count"] == 3
    left = {"types": [job_type], "statuses": ["PENDING"]}
    pending = server.gql(JOBS, {"filter": left, "first": 10}, ADMIN_SECRET)["jobs"]["nodes"]
    assert sorted(n["id"] for n in pending) == sorted(made[0::2])
    assert claim(server, ADMIN_SECRET, [job_type])["job"]["id"] == made[0]


def test_a_nul_character_is_refused_in_a_payload_and_a_filter(
    server: LiveServer, job_type: str
) -> None:
    for payload in ({"a": "x\x00y"}, {"k\x00": 1}, {"a": [{"b": "\x00"}]}):
        out = enqueue(server, ADMIN_SECRET, type=job_type, payload=payload)
        assert codes(out) == ["VALIDATION_FAILED"], out
        assert out["userErrors"][0]["field"] == ["input", "payload"], out
    nodes = server.gql(LIST, {"filter": {"types": [job_type]}}, ADMIN_SECRET)["jobs"]["nodes"]
    assert nodes == []
    body = server.post(JOBS, {"filter": {"payloadContains": {"a": "\x00"}}}, ADMIN_SECRET).json()
    assert top_level_codes(body) == ["BAD_USER_INPUT"], body
    # The escape's text (a backslash, then u0000) is no NUL: kept as it is.
    text = {"a": "\\u0000", "b": "\\\\u0000"}
    assert enqueued(server, ADMIN_SECRET, type=job_type, payload=text)["payload"] == text
    held = {"types": [job_type], "payloadContains": {"a": "\\u0000"}}
    assert len(server.gql(LIST, {"filter": held}, ADMIN_SECRET)["jobs"]["nodes"]) == 1
