"""V-01: no authentication. Every operation but `__typename` and introspection needs a live
bearer key; a bad key is refused before anything runs (401 under
application/graphql-response+json, 200 under application/json, UNAUTHENTICATED either way);
roles are enforced with FORBIDDEN."""

from __future__ import annotations

import json
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from queuelog.auth.keys import generate_secret
from tests.api.attack import (
    COMPLETE,
    FAIL,
    api_keys,
    claim,
    enqueued,
    send,
    snapshot,
    top_level_codes,
)
from tests.support import ADMIN_SECRET, LiveServer, key_refused

# One operation per root field, with arguments that would do harm if they ran.
QUERIES = {
    "viewer": "{ viewer { name role } }",
    "job": "query($id: ID!) { job(id: $id) { id status } }",
    "jobs": "query($type: String) { jobs(type: $type) { totalCount } }",
    "queueStats": "query($type: String) { queueStats(type: $type) { pending running } }",
    "apiKeys": "{ apiKeys { name } }",
    "schedules": "{ schedules { name lastJob { id } } }",
    "jobTypes": "{ jobTypes { name paused stats { pending } } }",
    "throughput": """{ throughput(since: "2026-01-01T00:00:00Z", until: "2026-01-01T01:00:00Z") {
        enqueued } }""",
}
MUTATIONS = {
    "enqueueJob": """mutation($type: String!) {
        enqueueJob(input: {type: $type, priority: CRITICAL}) { created } }""",
    "enqueueJobs": """mutation($type: String!) {
        enqueueJobs(inputs: [{type: $type}, {type: $type}]) { jobs { id } } }""",
    "claimJob": "mutation($type: String!) { claimJob(types: [$type]) { job { id } } }",
    "claimJobs": "mutation($type: String!) { claimJobs(limit: 5, types: [$type]) { jobs { id } } }",
    "heartbeatJob": "mutation($id: ID!) { heartbeatJob(id: $id, leaseSeconds: 9) { job { id } } }",
    "completeJob": "mutation($id: ID!) { completeJob(id: $id, result: {x: 1}) { job { id } } }",
    "failJob": """mutation($id: ID!) {
        failJob(id: $id, error: "boom", retryable: false) { job { id } } }""",
    "reportJobs": """mutation($id: ID!) {
        reportJobs(outcomes: [{id: $id, result: {x: 1}}]) { outcomes { job { id } } } }""",
    "cancelJob": "mutation($id: ID!) { cancelJob(id: $id) { job { id } } }",
    "retryJob": "mutation($failed: ID!) { retryJob(id: $failed) { job { id } } }",
    "cancelJobs": "mutation($type: String!) { cancelJobs(filter: {types: [$type]}) { count } }",
    "retryJobs": "mutation($type: String!) { retryJobs(filter: {types: [$type]}) { count } }",
    "createApiKey": """mutation($name: String!) {
        createApiKey(input: {name: $name, role: ADMIN}) { secret } }""",
    "revokeApiKey": "mutation($victim: String!) { revokeApiKey(name: $victim) }",
    "upsertSchedule": """mutation($name: String!, $type: String!) {
        upsertSchedule(input: {name: $name, type: $type, cron: "@every 1s"}) {
        schedule { name } } }""",
    "deleteSchedule": "mutation($name: String!) { deleteSchedule(name: $name) }",
    "runScheduleNow": "mutation($name: String!) { runScheduleNow(name: $name) { job { id } } }",
    "pauseJobType": "mutation($type: String!) { pauseJobType(type: $type) { jobType { paused } } }",
    "resumeJobType": "mutation($type: String!) { resumeJobType(type: $type) { jobType { name } } }",
    "setJobTypeLimits": """mutation($type: String!) {
        setJobTypeLimits(type: $type, limits: {maxRunning: 1}) { jobType { name } } }""",
}
REVOKE = "mutation($n: String!) { revokeApiKey(name: $n) }"
FIELDS = """query($type: String!) { __type(name: $type) { fields { name } } }"""


def _fixture(server: LiveServer, job_type: str) -> dict[str, Any]:
    """A RUNNING job, a FAILED job and a live worker key to aim the attacks at."""
    worker_name = server.unique_name("victim-worker")
    worker = server.create_key("WORKER", [job_type], name=worker_name)
    failed = enqueued(server, ADMIN_SECRET, type=job_type, maxRetries=0)
    claimed = claim(server, worker, [job_type])["job"]
    out = server.gql(FAIL, {"id": failed["id"], "error": "x", "retryable": False}, worker)
    assert out["failJob"]["job"]["status"] == "FAILED"
    running = enqueued(server, ADMIN_SECRET, type=job_type)
    assert claim(server, worker, [job_type])["job"]["id"] == running["id"]
    assert claimed["id"] == failed["id"]
    return {
        "type": job_type,
        "id": running["id"],
        "failed": failed["id"],
        "name": server.unique_name("intruder"),
        "victim": worker_name,
        "worker": worker,
    }


def _used_vars(doc: str, args: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if f"${k}" in doc}


def test_v01_every_root_field_is_listed(server: LiveServer) -> None:
    """The tables above must name every root field, so a new field cannot skip these tests."""
    for root, table in (("Query", QUERIES), ("Mutation", MUTATIONS)):
        fields = server.gql(FIELDS, {"type": root})["__type"]["fields"]
        assert {f["name"] for f in fields} == set(table), root


def test_v01_no_header_every_field_unauthenticated(server: LiveServer, job_type: str) -> None:
    args = _fixture(server, job_type)
    before, keys_before = snapshot(server, job_type), api_keys(server)
    for name, doc in {**QUERIES, **MUTATIONS}.items():
        resp = send(server, doc, _used_vars(doc, args), {})
        body = resp.json()
        assert resp.status_code == 200, (name, body)
        assert body["data"] in (None, {name: None}), (name, body)
        assert top_level_codes(body) == ["UNAUTHENTICATED"], (name, body)
        assert body["errors"][0]["path"] == [name]
        assert "Bearer" in body["errors"][0]["message"]
    assert snapshot(server, job_type) == before
    assert api_keys(server) == keys_before


def test_v01_introspection_and_typename_answer_anonymously(server: LiveServer) -> None:
    assert server.gql("{ __typename }") == {"__typename": "Query"}
    assert server.gql("mutation { __typename }") == {"__typename": "Mutation"}
    schema = server.gql("{ __schema { queryType { name } mutationType { name } } }")
    assert schema["__schema"] == {
        "queryType": {"name": "Query"},
        "mutationType": {"name": "Mutation"},
    }


BAD_HEADERS = {
    "basic scheme": "Basic YWRtaW46YWRtaW4=",
    "bearer without token": "Bearer",
    "token without scheme": ADMIN_SECRET,
    "unknown key": "Bearer ql_" + "A" * 43,
    "unknown key, current format": "Bearer " + generate_secret(),
    "checksum wrong": "Bearer " + generate_secret()[:-1] + "!",
    "admin secret with a typo": "Bearer " + ADMIN_SECRET[:-1] + "X",
    "oversized key": "Bearer ql_" + "x" * 5000,
    "sql in key": "Bearer ql_' OR '1'='1",
}


def test_v01_bad_header_refused_before_anything_runs(server: LiveServer, job_type: str) -> None:
    """A key that was sent and is not live is refused outright, even for `__typename`, so a
    typo never silently runs as nobody. The refusal is a request error: 200 for
    `application/json` clients (many hide the body of any other status), and its message is
    in `WWW-Authenticate` too."""
    args = _fixture(server, job_type)
    before, keys_before = snapshot(server, job_type), api_keys(server)
    for what, header in BAD_HEADERS.items():
        for name, doc in {"__typename": "{ __typename }", **QUERIES, **MUTATIONS}.items():
            resp = send(server, doc, _used_vars(doc, args), {"Authorization": header})
            assert key_refused(resp), (what, name, resp.text)
            assert resp.headers["www-authenticate"].startswith('Bearer realm="queuelog"')
    assert snapshot(server, job_type) == before
    assert api_keys(server) == keys_before


def test_v01_bad_key_is_401_for_graphql_response_json(server: LiveServer) -> None:
    """Clients that accept application/graphql-response+json read the body of any status
    (Apollo Client 4 among them): for them the refusal is 401, the same error in the body."""
    accept = {"Accept": "application/graphql-response+json, application/json;q=0.9"}
    for what, header in BAD_HEADERS.items():
        resp = send(server, "{ __typename }", {}, {"Authorization": header, **accept})
        assert resp.status_code == 401, (what, resp.text)
        assert resp.headers["content-type"].startswith("application/graphql-response+json")
        body = resp.json()
        assert "data" not in body and top_level_codes(body) == ["UNAUTHENTICATED"], what
        message = body["errors"][0]["message"]
        assert f'error_description="{message}"' in resp.headers["www-authenticate"]
    # No key is not a refusal: the request runs, and fields that need a key say so.
    anonymous = send(server, QUERIES["viewer"], {}, accept)
    assert anonymous.status_code == 200
    assert top_level_codes(anonymous.json()) == ["UNAUTHENTICATED"]


def test_v01_revoked_key_refused_at_once(server: LiveServer, job_type: str) -> None:
    name = server.unique_name("leaving")
    key = server.create_key("PRODUCER", [job_type], name=name)
    assert server.gql("{ viewer { name } }", key=key)["viewer"]["name"] == name
    enqueued(server, key, type=job_type)

    revoked = server.gql(REVOKE, {"n": name}, ADMIN_SECRET)
    assert revoked == {"revokeApiKey": True}
    before = snapshot(server, job_type)
    for doc in (QUERIES["viewer"], MUTATIONS["enqueueJob"]):
        resp = server.post(doc, {"type": job_type}, key)
        assert key_refused(resp), resp.text
        assert resp.json()["errors"][0]["message"] == "invalid or revoked API key"
    assert snapshot(server, job_type) == before
    assert api_keys(server)[name]["revokedAt"] is not None
    # Revoking again, or revoking nobody, reports that nothing was revoked.
    again = server.gql(REVOKE, {"n": name}, ADMIN_SECRET)
    assert again == {"revokeApiKey": False}
    nobody = server.gql(REVOKE, {"n": name + "-nobody"}, ADMIN_SECRET)
    assert nobody == {"revokeApiKey": False}


def _forbidden(server: LiveServer, key: str, doc: str, args: dict[str, Any]) -> dict[str, Any]:
    resp = server.post(doc, _used_vars(doc, args), key)
    body = resp.json()
    assert resp.status_code == 200, body
    assert top_level_codes(body) == ["FORBIDDEN"], body
    assert body["data"] is None
    return dict(body)


def test_v01_wrong_role_forbidden(server: LiveServer, job_type: str) -> None:
    args = _fixture(server, job_type)
    producer = server.create_key("PRODUCER", [job_type], max_priority="CRITICAL")
    worker = args["worker"]
    enqueued(server, producer, type=job_type)
    before, keys_before = snapshot(server, job_type), api_keys(server)

    producer_may_not = ["claimJob", "claimJobs", "heartbeatJob", "completeJob", "failJob"]
    producer_may_not += ["reportJobs"]
    worker_may_not = ["enqueueJob", "enqueueJobs", "cancelJob", "cancelJobs"]
    admin_only = ["retryJob", "retryJobs", "createApiKey", "revokeApiKey"]
    admin_only += ["upsertSchedule", "deleteSchedule", "runScheduleNow"]
    admin_only += ["pauseJobType", "resumeJobType", "setJobTypeLimits"]
    for name in producer_may_not + admin_only:
        body = _forbidden(server, producer, MUTATIONS[name], args)
        assert "producer" in body["errors"][0]["message"], name
    for name in worker_may_not + admin_only:
        _forbidden(server, worker, MUTATIONS[name], args)
    for key in (producer, worker):
        _forbidden(server, key, QUERIES["apiKeys"], args)
        _forbidden(server, key, QUERIES["schedules"], args)
        # Not even the admin key itself can be revoked by a non-admin.
        _forbidden(server, key, MUTATIONS["revokeApiKey"], {"victim": "admin"})

    assert snapshot(server, job_type) == before
    assert api_keys(server) == keys_before
    assert server.gql("{ viewer { role } }", key=ADMIN_SECRET)["viewer"]["role"] == "ADMIN"


def test_v01_settling_by_a_producer_is_forbidden(server: LiveServer, job_type: str) -> None:
    args = _fixture(server, job_type)
    producer = server.create_key("PRODUCER", [job_type])
    before = snapshot(server, job_type)
    for doc, variables in (
        (COMPLETE, {"id": args["id"], "result": {"forged": True}}),
        (FAIL, {"id": args["id"], "error": "forged", "retryable": False}),
    ):
        resp = server.post(doc, variables, producer)
        assert top_level_codes(resp.json()) == ["FORBIDDEN"], resp.text
    assert snapshot(server, job_type) == before


def _ws_closed(server: LiveServer, first: dict[str, Any]) -> tuple[int, str] | None:
    """Send one message on a fresh graphql-transport-ws socket; the code and reason it was
    closed with (None when the server answered instead)."""
    with connect(server.ws_url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
        ws.send(json.dumps(first))
        try:
            ws.recv(timeout=10)
        except ConnectionClosed as closed:
            return None if closed.rcvd is None else (closed.rcvd.code, closed.rcvd.reason)
        return None


def test_v01_websocket_needs_a_live_key(server: LiveServer) -> None:
    """Refusals close 4401 (graphql-ws clients do not retry it) saying what is wrong."""
    name = server.unique_name("ws-leaving")
    revoked = server.create_key("PRODUCER", name=name)
    live = server.create_key("PRODUCER")
    server.gql(REVOKE, {"n": name}, ADMIN_SECRET)
    cases: list[tuple[dict[str, Any] | None, str]] = [
        (None, "a live API key is required"),
        ({}, "a live API key is required"),
        ({"authorization": "Bearer ql_nope"}, "invalid or revoked API key"),
        ({"authorization": "Bearer qlk_nope"}, "not a queuelog API key"),
        ({"authorization": revoked}, "must be 'Bearer <api key>'"),
        ({"authorization": f"Bearer {revoked}"}, "invalid or revoked API key"),
    ]
    for payload, reason in cases:
        init: dict[str, Any] = {"type": "connection_init"}
        if payload is not None:
            init["payload"] = payload
        closed = _ws_closed(server, init)
        assert closed is not None and closed[0] == 4401 and reason in closed[1], (payload, closed)
    subscribe = {
        "type": "subscribe",
        "id": "1",
        "payload": {"query": "subscription { jobStatusChanged { status } }"},
    }
    assert _ws_closed(server, subscribe) == (4401, "Unauthorized")  # before connection_init
    with connect(server.ws_url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
        ws.send(
            json.dumps({"type": "connection_init", "payload": {"authorization": f"Bearer {live}"}})
        )
        assert json.loads(ws.recv(timeout=10))["type"] == "connection_ack"


def test_v01_legacy_websocket_refusal_says_why(server: LiveServer) -> None:
    """The legacy graphql-ws protocol: connection_error with the message, then 4403 with it
    as the reason."""
    with connect(server.ws_url, subprotocols=["graphql-ws"]) as ws:  # type: ignore[list-item]
        ws.send(json.dumps({"type": "connection_init", "payload": {"authorization": "Bearer x"}}))
        error = json.loads(ws.recv(timeout=10))
        assert error["type"] == "connection_error"
        assert error["payload"]["code"] == "UNAUTHENTICATED"
        try:
            ws.recv(timeout=10)
            raise AssertionError("the socket must close")
        except ConnectionClosed as closed:
            assert closed.rcvd is not None
            assert (closed.rcvd.code, closed.rcvd.reason) == (4403, error["payload"]["message"])


def test_v01_wrong_role_names_each_role_once_with_its_article(server: LiveServer) -> None:
    worker = server.create_key("WORKER")
    producer = server.create_key("PRODUCER")
    cases = [
        (worker, "{ apiKeys { name } }", "this needs an admin key; yours is a worker key"),
        (
            worker,
            'mutation { enqueueJob(input: {type: "email"}) { created } }',
            "this needs a producer or admin key; yours is a worker key",
        ),
        (
            producer,
            'mutation { claimJob(types: ["email"]) { job { id } } }',
            "this needs a worker or admin key; yours is a producer key",
        ),
    ]
    for key, doc, message in cases:
        body = server.post(doc, {}, key).json()
        assert [e["message"] for e in body["errors"]] == [message], body
