"""Schedules through the API of live servers: admins manage them, INVALID_SCHEDULE for what
does not parse or never fires, runScheduleNow and Job.schedule, TOML-seeded schedules, and
an `@every 1s` schedule on three replicas of one PostgreSQL making one job per second in
all."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support import LiveServer

UPSERT = """mutation($i: ScheduleInput!) { upsertSchedule(input: $i) {
  schedule { name type payload priority cron timezone paused nextRunAt lastRunAt lastJob { id } }
  userErrors { code field } } }"""
LIST = "{ schedules { name paused nextRunAt lastRunAt lastJob { id schedule } } }"


def post(server: LiveServer, query: str, key: str, **variables: Any) -> dict[str, Any]:
    body = server.post(query, variables, key).json()
    assert "errors" not in body, body
    return dict(body["data"])


def test_admins_manage_schedules(server: LiveServer, job_type: str) -> None:
    admin = server.admin_key
    name = server.unique_name("nightly")
    i = {"name": name, "type": job_type, "cron": "0 3 * * *", "timezone": "Europe/Paris",
         "payload": {"report": "daily"}, "priority": "HIGH"}  # fmt: skip
    got = post(server, UPSERT, admin, i=i)["upsertSchedule"]
    assert got["userErrors"] == []
    s = got["schedule"]
    assert (s["name"], s["cron"], s["timezone"], s["priority"]) == (name, "0 3 * * *",
            "Europe/Paris", "HIGH")  # fmt: skip
    assert s["payload"] == {"report": "daily"} and s["paused"] is False
    due = datetime.fromisoformat(s["nextRunAt"])
    assert (due.hour, due.minute) in ((2, 0), (1, 0))  # 03:00 in Paris, in UTC
    assert s["lastRunAt"] is None and s["lastJob"] is None

    ran = post(server, f'mutation {{ runScheduleNow(name: "{name}") {{ job {{ id schedule '
               "producer type payload priority } created } }", admin)["runScheduleNow"]  # fmt: skip
    assert ran["created"] is True
    assert ran["job"]["schedule"] == name and ran["job"]["producer"] == f"schedule:{name}"
    assert ran["job"]["payload"] == {"report": "daily"} and ran["job"]["priority"] == "HIGH"

    bad = post(server, UPSERT, admin, i={**i, "cron": "0 3 * *"})["upsertSchedule"]
    assert bad["userErrors"] == [{"code": "INVALID_SCHEDULE", "field": ["input", "cron"]}]
    bad = post(server, UPSERT, admin, i={**i, "timezone": "Nowhere/Else"})["upsertSchedule"]
    assert bad["userErrors"] == [{"code": "INVALID_SCHEDULE", "field": ["input", "timezone"]}]

    assert name in [x["name"] for x in post(server, LIST, admin)["schedules"]]
    delete = f'mutation {{ deleteSchedule(name: "{name}") }}'
    assert post(server, delete, admin)["deleteSchedule"] is True
    assert post(server, delete, admin)["deleteSchedule"] is False
    run = f'mutation {{ runScheduleNow(name: "{name}") {{ userErrors {{ code }} }} }}'
    missing = post(server, run, admin)["runScheduleNow"]
    assert missing["userErrors"] == [{"code": "NOT_FOUND"}]


@pytest.mark.parametrize("cron", ["0 0 31 2 *", "0 0 30 2 *", "15 10 31 4,6,9,11 *"])
@pytest.mark.parametrize("paused", [False, True])
def test_a_cron_that_never_fires_is_invalid_schedule(
    server: LiveServer, job_type: str, cron: str, paused: bool
) -> None:
    """A date no calendar has parses as cron, but never comes: a clear INVALID_SCHEDULE
    (once a server error), paused or not, and nothing is stored."""
    admin, name = server.admin_key, server.unique_name("never")
    query = UPSERT.replace("userErrors { code field }", "userErrors { code field message }")
    i = {"name": name, "type": job_type, "cron": cron, "paused": paused}
    bad = post(server, query, admin, i=i)["upsertSchedule"]
    assert bad["schedule"] is None
    assert bad["userErrors"] == [
        {
            "code": "INVALID_SCHEDULE",
            "field": ["input", "cron"],
            "message": "cron never fires: no date matches it (such as day 31 of February)",
        }
    ]
    assert name not in [x["name"] for x in post(server, LIST, admin)["schedules"]]


def test_only_admins_change_schedules_and_key_names_cannot_pose_as_one(server: LiveServer) -> None:
    producer = server.create_key("PRODUCER")
    for query in (LIST, 'mutation { deleteSchedule(name: "x") }'):
        body = server.post(query, None, producer).json()
        assert body["errors"][0]["extensions"]["code"] == "FORBIDDEN", body
    taken = post(server, 'mutation { createApiKey(input: {name: "schedule:x", role: PRODUCER}) '
                 "{ userErrors { code } } }", server.admin_key)["createApiKey"]  # fmt: skip
    assert taken["userErrors"] == [{"code": "VALIDATION_FAILED"}]


def test_a_due_schedule_enqueues_and_records_its_run(server: LiveServer, job_type: str) -> None:
    admin, name = server.admin_key, server.unique_name("every")
    post(server, UPSERT, admin, i={"name": name, "type": job_type, "cron": "@every 1s"})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        (s,) = [x for x in post(server, LIST, admin)["schedules"] if x["name"] == name]
        if s["lastJob"] is not None:
            break
        time.sleep(0.2)
    assert s["lastJob"]["schedule"] == name
    assert datetime.fromisoformat(s["nextRunAt"]) > datetime.fromisoformat(s["lastRunAt"])
    post(server, UPSERT, admin, i={"name": name, "type": job_type, "cron": "@every 1s",
                                   "paused": True})  # fmt: skip
    (s,) = [x for x in post(server, LIST, admin)["schedules"] if x["name"] == name]
    assert s["paused"] is True and s["nextRunAt"] is None


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_the_toml_file_seeds_schedules(tmp_path: Path, db_url: str) -> None:
    cfg = tmp_path / "queuelog.toml"
    cfg.write_text('[schedules.cleanup]\ntype = "email"\ncron = "*/10 * * * *"\n'
                   'payload = {older_than_days = 30}\n')  # fmt: skip
    extra = {"QUEUELOG_CONFIG": str(cfg)}
    with LiveServer(db_url, tmp_path, env_extra=extra) as server:
        (s,) = post(server, "{ schedules { name } }", server.admin_key)["schedules"]
        assert s == {"name": "cleanup"}
        post(server, UPSERT, server.admin_key,
             i={"name": "cleanup", "type": "email", "cron": "@every 1h"})  # fmt: skip
    with LiveServer(db_url, tmp_path, env_extra=extra) as server:  # the API's change is kept
        (s,) = post(server, "{ schedules { name cron } }", server.admin_key)["schedules"]
        assert s == {"name": "cleanup", "cron": "@every 1h"}


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_three_replicas_make_one_job_per_second_in_all(tmp_path: Path, db_url: str) -> None:
    servers = [LiveServer(db_url, tmp_path).start() for _ in range(3)]
    try:
        a = servers[0]
        post(a, UPSERT, a.admin_key, i={"name": "tick", "type": "email", "cron": "@every 1s"})
        time.sleep(5)
        post(a, UPSERT, a.admin_key, i={"name": "tick", "type": "email", "cron": "@every 1s",
                                        "paused": True})  # fmt: skip
        time.sleep(1)  # a round that had begun finishes
        jobs = post(a, '{ jobs(first: 100, type: "email") { nodes { idempotencyKey schedule } } }',
                    a.admin_key)["jobs"]["nodes"]  # fmt: skip
    finally:
        for s in servers:
            s.stop()
    keys = sorted(datetime.fromisoformat(j["idempotencyKey"]) for j in jobs)
    assert all(j["schedule"] == "tick" for j in jobs)
    assert len(keys) >= 3
    seconds = [(k - keys[0]).total_seconds() for k in keys]
    assert seconds == [float(i) for i in range(len(keys))]  # one per second, none twice
