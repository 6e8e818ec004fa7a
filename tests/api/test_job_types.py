"""Job types through the API of a live server, on SQLite and PostgreSQL: jobTypes, pause and
resume, who may change them, concurrency keys, and the concurrencyKey and schedule filters."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tests.support import LiveServer

TYPE_FIELDS = """name paused oldestPendingAt
  stats { pending running completed failed cancelled }
  limits { maxRunning maxRunningPerKey maxStartsPerSecond }"""
JOB_TYPES = f"{{ jobTypes {{ {TYPE_FIELDS} }} }}"
PAUSE = f"""mutation($t: String!) {{ pauseJobType(type: $t) {{
  jobType {{ {TYPE_FIELDS} }} userErrors {{ code field }} }} }}"""
RESUME = f"""mutation($t: String!) {{ resumeJobType(type: $t) {{
  jobType {{ {TYPE_FIELDS} }} userErrors {{ code field }} }} }}"""
LIMITS = f"""mutation($t: String!, $l: JobTypeLimitsInput!) {{
  setJobTypeLimits(type: $t, limits: $l) {{ jobType {{ {TYPE_FIELDS} }}
  userErrors {{ code field }} }} }}"""
ENQUEUE = """mutation($i: EnqueueJobInput!) { enqueueJob(input: $i) {
  job { id runAt concurrencyKey schedule } userErrors { code field } } }"""
CLAIM = """mutation($t: [String!]) { claimJob(types: $t) { job { id type concurrencyKey }
  userErrors { code } } }"""
LIST = """query($f: JobFilter) { jobs(filter: $f, first: 100) { nodes { id concurrencyKey } }
  }"""


def enqueue(server: LiveServer, key: str, **fields: Any) -> dict[str, Any]:
    out = server.gql(ENQUEUE, {"i": fields}, key)["enqueueJob"]
    assert out["userErrors"] == [], out
    return dict(out["job"])


def claim(server: LiveServer, key: str, *types: str) -> dict[str, Any] | None:
    out = server.gql(CLAIM, {"t": list(types)}, key)["claimJob"]
    assert out["userErrors"] == [], out
    return out["job"]  # type: ignore[no-any-return]


def job_type_of(server: LiveServer, key: str, name: str) -> dict[str, Any]:
    (found,) = [t for t in server.gql(JOB_TYPES, None, key)["jobTypes"] if t["name"] == name]
    return dict(found)


def test_a_paused_type_is_skipped_by_claims_and_still_takes_jobs(
    server: LiveServer, job_type: str, other_job_type: str
) -> None:
    admin = server.admin_key
    worker = server.create_key("WORKER", [job_type, other_job_type])
    paused = server.gql(PAUSE, {"t": job_type}, admin)["pauseJobType"]
    assert paused["userErrors"] == [] and paused["jobType"]["paused"] is True
    first = enqueue(server, admin, type=job_type)  # enqueueing still works
    other = enqueue(server, admin, type=other_job_type)
    assert claim(server, worker, job_type) is None
    got = claim(server, worker, job_type, other_job_type)
    assert got is not None and got["id"] == other["id"]  # the other type still claims
    assert claim(server, worker) is None  # all its types: the paused one is skipped
    assert job_type_of(server, admin, job_type)["stats"]["pending"] == 1

    resumed = server.gql(RESUME, {"t": job_type}, admin)["resumeJobType"]
    assert resumed["userErrors"] == [] and resumed["jobType"]["paused"] is False
    got = claim(server, worker, job_type)
    assert got is not None and got["id"] == first["id"]


def test_job_types_show_counts_limits_and_the_oldest_pending_job(
    server: LiveServer, job_type: str, other_job_type: str
) -> None:
    admin = server.admin_key
    fresh = job_type_of(server, admin, job_type)
    assert fresh == {
        "name": job_type,
        "paused": False,
        "oldestPendingAt": None,
        "stats": {"pending": 0, "running": 0, "completed": 0, "failed": 0, "cancelled": 0},
        "limits": {"maxRunning": None, "maxRunningPerKey": None, "maxStartsPerSecond": None},
    }
    producer = server.create_key("PRODUCER", [job_type])
    older = enqueue(server, producer, type=job_type, priority="LOW")
    enqueue(server, producer, type=job_type, priority="MEDIUM")
    enqueue(server, admin, type=job_type, delaySeconds=3600)
    seen = job_type_of(server, admin, job_type)
    assert seen["stats"]["pending"] == 3
    assert seen["oldestPendingAt"] is not None
    assert datetime.fromisoformat(seen["oldestPendingAt"]) == datetime.fromisoformat(
        older["runAt"]
    )  # the oldest runAt, whatever the priorities

    # A producer sees its allowed types, counted over its own jobs.
    mine = server.gql(JOB_TYPES, None, producer)["jobTypes"]
    assert [t["name"] for t in mine] == [job_type]
    assert mine[0]["stats"]["pending"] == 2
    # A viewer sees every type, counted over every job.
    viewer = server.create_key("VIEWER")
    names = {t["name"]: t for t in server.gql(JOB_TYPES, None, viewer)["jobTypes"]}
    assert {job_type, other_job_type} <= set(names)
    assert names[job_type]["stats"]["pending"] == 3


def test_only_admins_change_job_types_and_bad_requests_change_nothing(
    server: LiveServer, job_type: str
) -> None:
    admin = server.admin_key
    for role in ("VIEWER", "PRODUCER", "WORKER"):
        key = server.create_key(role, None if role == "VIEWER" else [job_type])
        for query, variables in (
            (PAUSE, {"t": job_type}),
            (RESUME, {"t": job_type}),
            (LIMITS, {"t": job_type, "l": {"maxRunning": 1}}),
        ):
            body = server.post(query, variables, key).json()
            assert body["errors"][0]["extensions"]["code"] == "FORBIDDEN", (role, body)
    assert job_type_of(server, admin, job_type)["paused"] is False

    for query, variables in (
        (PAUSE, {"t": "no-such-type"}),
        (RESUME, {"t": "no-such-type"}),
        (LIMITS, {"t": "no-such-type", "l": {"maxRunning": 1}}),
    ):
        out = next(iter(server.gql(query, variables, admin).values()))
        assert out == {"jobType": None, "userErrors": [
            {"code": "JOB_TYPE_NOT_ALLOWED", "field": ["type"]}]}  # fmt: skip

    server.gql(LIMITS, {"t": job_type, "l": {"maxRunning": 3}}, admin)
    for bad, field in (
        ({"maxRunning": 0}, "maxRunning"),
        ({"maxRunningPerKey": -1}, "maxRunningPerKey"),
        ({"maxStartsPerSecond": 0}, "maxStartsPerSecond"),
        ({"maxRunning": 5, "maxStartsPerSecond": -0.5}, "maxStartsPerSecond"),
    ):
        out = server.gql(LIMITS, {"t": job_type, "l": bad}, admin)["setJobTypeLimits"]
        assert out == {"jobType": None, "userErrors": [
            {"code": "VALIDATION_FAILED", "field": ["limits", field]}]}, bad  # fmt: skip
    limits = job_type_of(server, admin, job_type)["limits"]
    assert limits == {"maxRunning": 3, "maxRunningPerKey": None, "maxStartsPerSecond": None}


def test_concurrency_keys_are_kept_shown_and_filtered(server: LiveServer, job_type: str) -> None:
    admin = server.admin_key
    a = enqueue(server, admin, type=job_type, concurrencyKey="tenant-a")
    enqueue(server, admin, type=job_type, concurrencyKey="tenant-b")
    plain = enqueue(server, admin, type=job_type)
    assert a["concurrencyKey"] == "tenant-a" and plain["concurrencyKey"] is None
    found = server.gql(LIST, {"f": {"types": [job_type], "concurrencyKey": "tenant-a"}}, admin)
    assert found["jobs"]["nodes"] == [{"id": a["id"], "concurrencyKey": "tenant-a"}]
    for bad in ("", "x" * 256, "tab\there"):
        out = server.gql(ENQUEUE, {"i": {"type": job_type, "concurrencyKey": bad}}, admin)
        assert out["enqueueJob"] == {"job": None, "userErrors": [
            {"code": "VALIDATION_FAILED", "field": ["input", "concurrencyKey"]}]}, bad  # fmt: skip


def test_jobs_filter_by_the_schedule_that_enqueued_them(server: LiveServer, job_type: str) -> None:
    admin, name = server.admin_key, server.unique_name("filtered")
    server.gql(
        "mutation($i: ScheduleInput!) { upsertSchedule(input: $i) { userErrors { code } } }",
        {"i": {"name": name, "type": job_type, "cron": "0 3 * * *"}},
        admin,
    )
    ran = server.gql(
        f'mutation {{ runScheduleNow(name: "{name}") {{ job {{ id }} }} }}', None, admin
    )
    enqueue(server, admin, type=job_type)  # not the schedule's
    found = server.gql(LIST, {"f": {"types": [job_type], "schedule": name}}, admin)
    assert [j["id"] for j in found["jobs"]["nodes"]] == [ran["runScheduleNow"]["job"]["id"]]
    none = server.gql(LIST, {"f": {"schedule": name, "producer": "someone-else"}}, admin)
    assert none["jobs"]["nodes"] == []
