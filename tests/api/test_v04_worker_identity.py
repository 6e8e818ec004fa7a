"""V-04: spoofed worker ids. A worker's identity is its key's name; no argument, header or
input can name another worker."""

from __future__ import annotations

from tests.api.attack import CLAIM, admin_job, claim, enqueued, send, snapshot
from tests.support import ADMIN_SECRET, LiveServer

SPOOFS = [
    'mutation { claimJob(workerId: "legit-worker-1") { job { id workerId } } }',
    'mutation { claimJob(worker_id: "legit-worker-1") { job { id workerId } } }',
    'mutation { claimJobs(limit: 1, workerId: "legit-worker-1") { jobs { id workerId } } }',
]


def test_v04_schema_has_no_worker_id_argument(server: LiveServer) -> None:
    mutations = server.gql('{ __type(name: "Mutation") { fields { name args { name } } } }')
    for field in mutations["__type"]["fields"]:
        names = {a["name"].lower() for a in field["args"]}
        assert not names & {"workerid", "worker_id", "worker"}, field


def test_v04_sending_a_worker_id_is_refused(server: LiveServer, job_type: str) -> None:
    worker = server.create_key("WORKER", [job_type])
    enqueued(server, ADMIN_SECRET, type=job_type)
    before = snapshot(server, job_type)
    for doc in SPOOFS:
        resp = send(server, doc, {}, {"Authorization": f"Bearer {worker}"})
        body = resp.json()
        assert body.get("data") is None, body
        assert "Unknown argument" in body["errors"][0]["message"], body
    assert snapshot(server, job_type) == before


def test_v04_worker_id_is_the_keys_name(server: LiveServer, job_type: str) -> None:
    name = server.unique_name("real-worker")
    worker = server.create_key("WORKER", [job_type], name=name)
    job = enqueued(server, ADMIN_SECRET, type=job_type)
    # Headers a proxy might trust are not trusted here.
    resp = send(
        server,
        CLAIM,
        {"types": [job_type]},
        {
            "Authorization": f"Bearer {worker}",
            "X-Worker-Id": "legit-worker-1",
            "X-Forwarded-User": "legit-worker-1",
        },
    )
    claimed = resp.json()["data"]["claimJob"]["job"]
    assert claimed["id"] == job["id"]
    assert claimed["workerId"] == name
    assert server.gql("{ viewer { name } }", key=worker)["viewer"]["name"] == name
    assert admin_job(server, job["id"])["workerId"] == name


def test_v04_admin_claims_under_its_own_name(server: LiveServer, job_type: str) -> None:
    job = enqueued(server, ADMIN_SECRET, type=job_type)
    claimed = claim(server, ADMIN_SECRET, [job_type])["job"]
    assert claimed["id"] == job["id"] and claimed["workerId"] == "admin"
