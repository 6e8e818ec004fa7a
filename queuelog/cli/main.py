"""The `queuelog` command.

server commands (they read the server's QUEUELOG_* settings and its database):
  serve, migrate, keys, prune, recount, export-schema
client commands (they talk to a running server: --url/--key or QUEUELOG_URL/QUEUELOG_KEY):
  enqueue, jobs, worker
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from queuelog.cli import remote
from queuelog.domain.roles import Role

# Imported by the commands that use them, so that the commands speaking HTTP (enqueue, jobs,
# worker) and --help start without the server's modules (SQLAlchemy, Alembic, the web stack).
if TYPE_CHECKING:
    from queuelog.config import Settings
    from queuelog.runtime import Services

ADMIN_NAME = "admin"


def _services(settings: Settings | None = None) -> Services:
    from queuelog.config import Settings
    from queuelog.runtime import open_services
    from queuelog.storage.migrate import migrate

    s = open_services(settings or Settings())
    migrate(s.db)
    return s


async def _ensure_admin(s: Services) -> None:
    """On a database with no API key at all, create an admin key and print its secret once."""
    from queuelog.service.models import Priority

    if await s.keys.count():
        return
    _key, secret = await s.keys.create(
        ADMIN_NAME, Role.ADMIN, None, Priority.CRITICAL, secret=s.settings.admin_key
    )
    print(f"Created the admin API key {ADMIN_NAME!r}. Its secret, shown this once:")
    print(f"  {secret}" if s.settings.admin_key is None else "  (QUEUELOG_ADMIN_KEY)")
    print("Send it as 'Authorization: Bearer <secret>'.", flush=True)


def cmd_serve(args: argparse.Namespace) -> int:
    # Imported here so that keys, migrate and prune start without the web stack.
    import uvicorn

    from queuelog.config import Settings
    from queuelog.edge.app import create_app
    from queuelog.edge.serving import uvicorn_config
    from queuelog.runtime import open_services

    settings = Settings()
    # The app's lifespan migrates these services' database and then makes the first admin
    # key, in the server's own event loop, before it takes a request.
    app = create_app(
        settings, open_services(settings), before_serving=_ensure_admin, settle_heap=True
    )
    base = f"http://{args.host}:{args.port}"
    print(f"queuelog on {base}/graphql", flush=True)
    if settings.dashboard:
        print(f"dashboard: {base}/dashboard (sign in with an API key)", flush=True)

    config = uvicorn_config(app, settings, args.host, args.port, args.log_level)
    # uvicorn re-raises the signal that stopped it once it has shut down gracefully, which
    # would end the process "killed by SIGTERM"; a graceful stop is a success: exit 0.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _stopped)
    # On SIGTERM uvicorn closes each WebSocket with 1012 (service restart), which
    # graphql-ws, Apollo and urql clients answer by reconnecting and resubscribing.
    uvicorn.Server(config).run()
    return 0


def _stopped(sig: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def cmd_migrate(args: argparse.Namespace) -> int:
    _services().db.close()
    print("schema is up to date")
    return 0


def _database(settings: Settings, create: bool) -> str:
    """The database the keys commands use, as shown to the user (no password). A SQLite file
    that does not exist is refused unless `create`: a mistyped or missing
    QUEUELOG_DATABASE_URL would otherwise make a new, empty database that no server reads."""
    from queuelog.storage.engines import normalize_url

    url = normalize_url(settings.database_url)
    if url.get_backend_name() != "sqlite":
        return url.set(drivername=url.get_backend_name()).render_as_string(hide_password=True)
    path = Path(url.database or "").resolve()
    if not path.exists() and not create:
        raise ValueError(
            f"no database at {path} (QUEUELOG_DATABASE_URL={settings.database_url!r}): set "
            "QUEUELOG_DATABASE_URL to the server's database, or pass --create to make a new one"
        )
    return f"sqlite:///{path}"


def cmd_keys(args: argparse.Namespace) -> int:
    import asyncio

    from queuelog.config import Settings
    from queuelog.service.errors import DomainError
    from queuelog.service.models import Priority

    settings = Settings()
    shown = _database(settings, args.create)
    s = _services(settings)
    print(f"database: {shown}", file=sys.stderr)
    try:
        if args.keys_cmd == "create":
            types = None if args.types is None else [t for t in args.types.split(",") if t]
            try:
                key, secret = asyncio.run(
                    s.keys.create(
                        args.name, Role(args.role), types, Priority[args.max_priority.upper()]
                    )
                )
            except DomainError as exc:
                print(f"error: {exc.message}", file=sys.stderr)
                return 1
            print(f"created {key.role.value} key {key.name!r}; its secret, shown this once:")
            print(secret)
        elif args.keys_cmd == "list":
            print("name\trole\ttypes\tmax priority\tstate")
            for k in asyncio.run(s.keys.list()):
                types_shown = "*" if k.allowed_types is None else ",".join(k.allowed_types)
                state = "revoked" if k.revoked_at else "live"
                print(
                    f"{k.name}\t{k.role.value}\t{types_shown}\t"
                    f"{k.max_priority.name.lower()}\t{state}"
                )
        elif args.keys_cmd == "revoke":
            if not asyncio.run(s.keys.revoke(args.name)):
                print(f"error: no live key named {args.name!r}", file=sys.stderr)
                return 1
            print(f"revoked {args.name!r}")
    finally:
        s.db.close()
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    import asyncio

    from queuelog.service.retention import prune

    s = _services()
    try:
        counts = asyncio.run(prune(s.service, dry_run=args.dry_run))
    finally:
        s.db.close()
    verb = "would delete" if args.dry_run else "deleted"
    for status, n in counts.items():
        print(f"{verb} {n} {status} job(s)")
    return 0


def cmd_recount(args: argparse.Namespace) -> int:
    from queuelog.storage import jobs as jobs_sql

    s = _services()
    try:
        n = s.db.write_sync(jobs_sql.recount)
    finally:
        s.db.close()
    print(f"counted {n} job(s)")
    return 0


def cmd_export_schema(args: argparse.Namespace) -> int:
    from queuelog.api.schema import build_schema

    sys.stdout.write(build_schema().as_str() + "\n")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="queuelog", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    serve = sub.add_parser("serve", help="run the GraphQL server (and the dashboard)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (%(default)s)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (%(default)s)")
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug", "trace"],
        help="server log level (%(default)s)",
    )
    serve.set_defaults(fn=cmd_serve)

    sub.add_parser("migrate", help="create or upgrade the schema").set_defaults(fn=cmd_migrate)

    keys = sub.add_parser(
        "keys", help="create, list or revoke API keys (in QUEUELOG_DATABASE_URL's database)"
    )
    keys_sub = keys.add_subparsers(dest="keys_cmd", required=True)
    create = keys_sub.add_parser("create", help="create a key and print its secret once")
    create.add_argument("--name", required=True)
    create.add_argument("--role", required=True, choices=[r.value for r in Role])
    create.add_argument(
        "--types", help="comma-separated job types, among QUEUELOG_JOB_TYPES (default: all)"
    )
    create.add_argument("--max-priority", default="medium", choices=remote.PRIORITIES)
    listing = keys_sub.add_parser("list", help="list keys (never their secrets)")
    revoke = keys_sub.add_parser("revoke", help="revoke a key at once")
    revoke.add_argument("name")
    for command in (create, listing, revoke):
        command.add_argument(
            "--create",
            action="store_true",
            help="make QUEUELOG_DATABASE_URL's SQLite file if it does not exist",
        )
    keys.set_defaults(fn=cmd_keys)

    pr = sub.add_parser("prune", help="delete finished jobs past their retention")
    pr.add_argument("--dry-run", action="store_true", help="count them, delete nothing")
    pr.set_defaults(fn=cmd_prune)

    sub.add_parser(
        "recount", help="set the job counts (queueStats) from the jobs table"
    ).set_defaults(fn=cmd_recount)
    sub.add_parser("export-schema", help="print the GraphQL SDL").set_defaults(fn=cmd_export_schema)
    remote.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except ValueError as exc:  # bad input or configuration, e.g. an unknown URL scheme
        print(f"error: {_settings_error(exc)}", file=sys.stderr)
        return 2


def _settings_error(exc: ValueError) -> str:
    """A refused setting as `QUEUELOG_NAME: why`, without pydantic's type tags and links."""
    if not type(exc).__module__.startswith("pydantic"):
        return str(exc)
    lines = []
    for e in exc.errors():  # type: ignore[attr-defined]
        name = "QUEUELOG_" + "_".join(str(part) for part in e["loc"]).upper()
        message = str(e["msg"]).removeprefix("Value error, ")
        lines.append(message if message.startswith(name) else f"{name}: {message}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
