"""The `queuelog` command, run as a subprocess with its environment, on both backends."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from queuelog.storage import jobs as jobs_sql
from queuelog.storage.db import Database, normalize_url
from queuelog.storage.migrate import head_revision
from queuelog.storage.scope import EVERYTHING, Scope
from tests.storage.rows import insert, job
from tests.support import ADMIN_SECRET, LiveServer, key_refused, live_server

ROOT = Path(__file__).resolve().parent.parent
CHECK_CONTRACT = ROOT.parent / "shared" / "tools" / "check_contract.py"


def cli(*args: str, db_url: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("QUEUELOG_")}
    full.update(QUEUELOG_DATABASE_URL=db_url, **env)
    return subprocess.run(
        [sys.executable, "-m", "queuelog.cli", *args],
        env=full,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def create_key(db_url: str, cwd: Path, *args: str) -> str:
    out = cli("keys", "create", "--create", *args, db_url=db_url, cwd=cwd)
    assert out.returncode == 0, out.stderr
    secret = out.stdout.rstrip("\n").splitlines()[-1]
    assert secret.startswith("qlk_") and " " not in secret, out.stdout
    return secret


def test_keys_create_list_revoke_against_a_live_server(db_url: str, tmp_path: Path) -> None:
    producer = create_key(
        db_url,
        tmp_path,
        "--name",
        "shop",
        "--role",
        "producer",
        "--types",
        "email,pdf",
        "--max-priority",
        "high",
    )
    worker = create_key(db_url, tmp_path, "--name", "mailer", "--role", "worker")
    with live_server(db_url, tmp_path, admin_key=None) as server:
        viewer = "{ viewer { name role allowedTypes maxPriority } }"
        assert server.gql(viewer, key=producer)["viewer"] == {
            "name": "shop",
            "role": "PRODUCER",
            "allowedTypes": ["email", "pdf"],
            "maxPriority": "HIGH",
        }
        assert server.gql(viewer, key=worker)["viewer"] == {
            "name": "mailer",
            "role": "WORKER",
            "allowedTypes": None,
            "maxPriority": "MEDIUM",
        }
        enqueue = """mutation($p: JobPriority!) { enqueueJob(input: {type: "email", priority: $p}) {
                       job { id } userErrors { code } } }"""
        ok = server.gql(enqueue, {"p": "HIGH"}, producer)["enqueueJob"]
        assert ok["userErrors"] == [] and ok["job"] is not None
        refused = server.gql(enqueue, {"p": "CRITICAL"}, producer)["enqueueJob"]
        assert refused["userErrors"] == [{"code": "PRIORITY_NOT_ALLOWED"}]

        listed = cli("keys", "list", db_url=db_url, cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        lines = listed.stdout.splitlines()
        assert lines[0].split("\t") == ["name", "role", "types", "max priority", "state"]
        assert any(line.split("\t")[:2] == ["shop", "producer"] for line in lines), lines
        assert any(line.split("\t")[:2] == ["mailer", "worker"] for line in lines), lines
        for secret in (producer, worker):
            assert secret not in listed.stdout
            assert hashlib.sha256(secret.encode()).hexdigest() not in listed.stdout

        revoked = cli("keys", "revoke", "mailer", db_url=db_url, cwd=tmp_path)
        assert revoked.returncode == 0, revoked.stderr
        # Another process revoked it: this server notices once its cached verification
        # (QUEUELOG_KEY_CACHE_SECONDS, 1 s) runs out, which may not have happened yet.
        for _ in range(50):
            resp = server.post(viewer, key=worker)
            if key_refused(resp):
                break
            time.sleep(0.1)
        assert key_refused(resp), resp.text
        assert server.gql(viewer, key=producer)["viewer"]["name"] == "shop"


def test_keys_create_refuses_bad_input(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'q.db'}"
    create_key(db_url, tmp_path, "--name", "shop", "--role", "producer")
    dup = cli("keys", "create", "--name", "shop", "--role", "worker", db_url=db_url, cwd=tmp_path)
    assert dup.returncode != 0
    assert "'shop' exists already" in dup.stderr and "Traceback" not in dup.stderr
    assert "ql_" not in dup.stdout and "qlk_" not in dup.stdout

    bad_type = cli(
        "keys",
        "create",
        "--name",
        "x",
        "--role",
        "producer",
        "--types",
        "email,shutdown",
        db_url=db_url,
        cwd=tmp_path,
    )
    assert bad_type.returncode != 0 and "shutdown" in bad_type.stderr
    assert "Traceback" not in bad_type.stderr
    unknown = cli("keys", "revoke", "nobody", db_url=db_url, cwd=tmp_path)
    assert unknown.returncode == 1 and "'nobody'" in unknown.stderr
    listed = cli("keys", "list", db_url=db_url, cwd=tmp_path).stdout
    assert [line.split("\t")[0] for line in listed.splitlines()] == ["name", "shop"]


def test_serve_on_an_empty_database_prints_an_admin_secret_once(
    db_url: str, tmp_path: Path
) -> None:
    with live_server(db_url, tmp_path, admin_key=None) as server:
        first_log = server.log()
    lines = first_log.splitlines()
    at = next(i for i, line in enumerate(lines) if "admin API key" in line)
    secret = lines[at + 1].strip()
    assert secret.startswith("qlk_") and len(secret) == 53, first_log

    with live_server(db_url, tmp_path, admin_key=None) as server:
        second_log = server.log()  # a new port, so a new log file
        assert server.gql("{ viewer { name role } }", key=secret)["viewer"] == {
            "name": "admin",
            "role": "ADMIN",
        }
    assert "admin API key" not in second_log and secret not in second_log
    assert "queuelog on http://" in second_log


# Put on the server's path as sitecustomize: each alembic upgrade it runs prints a line.
COUNT_UPGRADES = """
from alembic import command

_upgrade = command.upgrade


def _counted(*args, **kwargs):
    print("alembic upgrade", flush=True)
    return _upgrade(*args, **kwargs)


command.upgrade = _counted
"""


def test_serve_migrates_a_fresh_database_once_and_starts(db_url: str, tmp_path: Path) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(COUNT_UPGRADES)
    server = LiveServer(db_url, tmp_path, {"PYTHONPATH": str(hook)})
    server.start()
    try:
        ready = httpx.get(server.url.removesuffix("/graphql") + "/readyz")
        assert ready.json()["status"] == "ok"
        assert ready.json()["migration"] == head_revision()
        assert server.gql("{ viewer { role } }", key=ADMIN_SECRET)["viewer"] == {"role": "ADMIN"}
    finally:
        server.stop()
    assert server.log().count("alembic upgrade") == 1, server.log()


def test_serve_takes_the_admin_secret_from_the_environment(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'q.db'}"
    with live_server(db_url, tmp_path, admin_key=ADMIN_SECRET) as server:
        assert server.gql("{ viewer { role } }", key=ADMIN_SECRET)["viewer"] == {"role": "ADMIN"}
        log = server.log()
    assert "admin API key" in log and ADMIN_SECRET not in log


def test_migrate_creates_the_schema(db_url: str, tmp_path: Path) -> None:
    for _ in range(2):  # and running it again changes nothing
        out = cli("migrate", db_url=db_url, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
    engine = sa.create_engine(normalize_url(db_url))
    try:
        tables = set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert {"jobs", "job_events", "api_keys", "alembic_version"} <= tables


def test_recount_sets_the_job_counts_from_the_table(db_url: str, tmp_path: Path) -> None:
    """After jobs changed without counting (a replica of an earlier version, SQL by hand),
    `queuelog recount` puts the counts that queueStats reads right."""
    assert cli("migrate", db_url=db_url, cwd=tmp_path).returncode == 0
    db = Database(db_url)
    try:
        insert(db, job(), job(), job(type="pdf", producer="p2"))
        db.write_sync(lambda tx: tx.conn.execute(sa.text("UPDATE job_counts SET n = n + 5")))
        out = cli("recount", db_url=db_url, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "counted 3 job(s)"
        counted = db.read_sync(jobs_sql.counts, scope=Scope(producer="p1"), job_type=None)
        assert counted["pending"] == 2
        by_type = db.read_sync(jobs_sql.counts, scope=EVERYTHING, job_type="pdf")
        assert by_type["pending"] == 1
    finally:
        db.close()


def test_export_schema_keeps_the_contract(tmp_path: Path) -> None:
    if not CHECK_CONTRACT.exists():
        pytest.skip(f"{CHECK_CONTRACT} not found: the shared contract is not beside this repo")
    sdl = cli("export-schema", db_url="sqlite:///unused.db", cwd=tmp_path)
    assert sdl.returncode == 0 and "type Query" in sdl.stdout
    check = subprocess.run(
        [sys.executable, str(CHECK_CONTRACT)], input=sdl.stdout, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout


@pytest.mark.parametrize(
    ("url", "command", "message"),
    [
        ("mysql://root@localhost/q", ["migrate"], "unsupported database URL scheme 'mysql'"),
        ("mysql://root@localhost/q", ["serve", "--port", "0"], "unsupported"),
        ("sqlite:///:memory:", ["keys", "list"], "SQLite file"),
        ("not a url at all", ["migrate"], "cannot parse the database URL"),
    ],
)
def test_bad_database_url_is_a_clear_error(
    url: str, command: list[str], message: str, tmp_path: Path
) -> None:
    out = cli(*command, db_url=url, cwd=tmp_path)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.startswith("error: ") and message in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_unusable_admin_key_is_refused_without_echoing_it(tmp_path: Path) -> None:
    """A QUEUELOG_ADMIN_KEY that could never authenticate is refused before anything starts."""
    db = tmp_path / "q.db"
    for bad in ("hunter2-changeme", "ql_short-hunter2", "ql_" + "hunter2 " * 5):
        out = cli(
            "serve", "--port", "0", db_url=f"sqlite:///{db}", cwd=tmp_path, QUEUELOG_ADMIN_KEY=bad
        )
        assert out.returncode == 2, out.stderr
        assert "QUEUELOG_ADMIN_KEY must" in out.stderr and "hunter2" not in out.stderr
    assert not db.exists()
