"""The `queuelog` command as a new user meets it: its help, what its client commands import,
the database the keys commands use, the job types and the admin key it accepts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from queuelog.auth.keys import generate_secret
from queuelog.config import Settings
from tests.support import live_server
from tests.test_cli import cli

# Modules of the server: a command that only speaks HTTP never needs them.
SERVER_MODULES = (
    "sqlalchemy",
    "alembic",
    "uvicorn",
    "starlette",
    "strawberry",
    "pydantic_settings",
    "queuelog.runtime",
    "queuelog.config",
    "queuelog.service",
    "queuelog.storage",
    "queuelog.auth",
    "queuelog.edge",
    "queuelog.api",
    "queuelog.events",
)
COMMANDS = ("serve", "migrate", "keys", "prune", "recount", "export-schema")
CLIENT_COMMANDS = ("enqueue", "jobs", "worker")
NOWHERE = "http://127.0.0.1:9/graphql"


def imported(*args: str, cwd: Path) -> set[str]:
    """The modules `queuelog ARGS` imports, as `python -X importtime` lists them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUEUELOG_")}
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "queuelog.cli", *args],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    lines = [line for line in out.stderr.splitlines() if line.startswith("import time:")]
    return {line.rsplit("|", 1)[-1].strip() for line in lines[1:]}


def _server_side(modules: set[str]) -> list[str]:
    return sorted(
        m for m in modules if any(m == s or m.startswith(s + ".") for s in SERVER_MODULES)
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["enqueue", "--help"],
        ["enqueue", "email", "--payload", '{"n": 1}', "--url", NOWHERE, "--key", "x"],
        ["jobs", "list", "--status", "failed", "--url", NOWHERE, "--key", "x"],
        ["jobs", "show", "1", "--url", NOWHERE, "--key", "x"],
        ["worker", "--help"],
    ],
)
def test_client_commands_import_nothing_of_the_server(args: list[str], tmp_path: Path) -> None:
    modules = imported(*args, cwd=tmp_path)
    assert "queuelog.cli.remote" in modules  # the listing is the command's own
    assert _server_side(modules) == []


def test_a_server_command_does_import_the_server(tmp_path: Path) -> None:
    """The same count sees the server's modules where a command needs them."""
    modules = imported("keys", "list", cwd=tmp_path)
    assert {"sqlalchemy", "queuelog.storage"} <= set(_server_side(modules))


def test_help_names_every_command_and_option(tmp_path: Path) -> None:
    out = cli("--help", db_url="sqlite:///unused.db", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    description = out.stdout.split("positional arguments")[0]
    for command in (*COMMANDS, *CLIENT_COMMANDS):
        assert command in description, (command, description)
    listed = out.stdout.split("positional arguments")[1]
    for command in (*COMMANDS, *CLIENT_COMMANDS):
        assert f"\n    {command}" in listed, (command, listed)

    serve = cli("serve", "--help", db_url="sqlite:///unused.db", cwd=tmp_path).stdout
    for text in ("address to listen on", "port to listen on", "server log level"):
        assert text in serve, serve


def test_keys_refuse_to_create_a_database_unless_asked(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for command in (["list"], ["revoke", "x"], ["create", "--name", "a", "--role", "worker"]):
        out = cli("keys", *command, db_url="sqlite:///./queuelog.db", cwd=elsewhere)
        assert out.returncode == 2, out.stderr
        assert "QUEUELOG_DATABASE_URL" in out.stderr and "--create" in out.stderr
        assert str(elsewhere / "queuelog.db") in out.stderr and "Traceback" not in out.stderr
    assert list(elsewhere.iterdir()) == []

    made = cli("keys", "create", "--create", "--name", "a", "--role", "worker",
               db_url="sqlite:///./queuelog.db", cwd=elsewhere)  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert f"database: sqlite:///{elsewhere / 'queuelog.db'}" in made.stderr
    listed = cli("keys", "list", db_url="sqlite:///./queuelog.db", cwd=elsewhere)
    assert listed.returncode == 0 and "database: sqlite:///" in listed.stderr
    assert [line.split("\t")[:2] for line in listed.stdout.splitlines()] == [
        ["name", "role"],
        ["a", "worker"],
    ]


def test_keys_name_a_postgresql_database_without_its_password(db_url: str, tmp_path: Path) -> None:
    out = cli("keys", "list", "--create", db_url=db_url, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    shown = out.stderr.splitlines()[0]
    assert shown.startswith("database: ") and db_url.split("://")[0] in shown, shown
    assert "psycopg" not in shown and "pysqlite" not in shown


def test_unconfigured_job_types_name_the_setting_and_the_toml_key(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'q.db'}"
    refused = cli("keys", "create", "--create", "--name", "r", "--role", "producer",
                  "--types", "report", db_url=db, cwd=tmp_path)  # fmt: skip
    assert refused.returncode == 1
    assert "report" in refused.stderr and "QUEUELOG_JOB_TYPES" in refused.stderr
    assert "job_types" in refused.stderr and "email, pdf, sync" in refused.stderr

    toml = tmp_path / "queuelog.toml"
    toml.write_text('job_types = ["email", "report"]\n')
    made = cli("keys", "create", "--name", "r", "--role", "producer", "--types", "report",
               db_url=db, cwd=tmp_path, QUEUELOG_CONFIG=str(toml))  # fmt: skip
    assert made.returncode == 0, made.stderr
    # The variable wins over the file.
    both = {"QUEUELOG_CONFIG": str(toml), "QUEUELOG_JOB_TYPES": "email"}
    again = cli("keys", "create", "--name", "r2", "--role", "producer", "--types", "report",
                db_url=db, cwd=tmp_path, **both)  # fmt: skip
    assert again.returncode == 1 and "QUEUELOG_JOB_TYPES" in again.stderr


def test_job_types_come_from_configuration_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in os.environ if n.startswith("QUEUELOG_")]:
        monkeypatch.delenv(name)
    toml = tmp_path / "q.toml"
    toml.write_text('job_types = ["report", "report", "email"]\n')
    assert Settings(config=toml).job_types == ("report", "email")
    assert Settings(config=toml, job_types="pdf").job_types == ("pdf",)
    assert Settings().job_types == ("email", "pdf", "sync")
    for bad in ('job_types = "report"\n', "job_types = []\n", 'job_types = ["a b"]\n'):
        toml.write_text(bad)
        with pytest.raises(ValueError):
            Settings(config=toml)


def test_the_admin_key_may_be_a_current_key(db_url: str, tmp_path: Path) -> None:
    secret = generate_secret()
    with live_server(db_url, tmp_path, admin_key=secret) as server:
        assert server.gql("{ viewer { role } }", key=secret)["viewer"] == {"role": "ADMIN"}
        log = server.log()
    assert secret not in log and f"{server.url.removesuffix('/graphql')}/dashboard" in log


def test_a_malformed_admin_key_is_a_clear_error(tmp_path: Path) -> None:
    good = generate_secret()
    db = tmp_path / "q.db"
    for bad in (good[:-1] + ("a" if good[-1] != "a" else "b"), "qlk_hunter2", "Bearer " + good):
        out = cli("serve", "--port", "0", db_url=f"sqlite:///{db}", cwd=tmp_path,
                  QUEUELOG_ADMIN_KEY=bad)  # fmt: skip
        assert out.returncode == 2, out.stderr
        assert out.stderr.startswith("error: QUEUELOG_ADMIN_KEY must be"), out.stderr
        assert "qlk_" in out.stderr and "generate_secret" in out.stderr
        assert (
            "pydantic" not in out.stderr and bad not in out.stderr and "hunter2" not in out.stderr
        )
    assert not db.exists()
