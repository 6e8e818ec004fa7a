"""The `queuelog` command: serve, keys, migrate, prune, export-schema."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from queuelog.cli import remote
from queuelog.config import Settings
from queuelog.runtime import Services, open_services
from queuelog.service.errors import DomainError
from queuelog.service.models import Priority, Role
from queuelog.service.retention import prune
from queuelog.storage import jobs as jobs_sql
from queuelog.storage.migrate import migrate

ADMIN_NAME = "admin"


def _services() -> Services:
    s = open_services(Settings())
    migrate(s.db)
    return s


async def _ensure_admin(s: Services) -> None:
    """On a database with no API key at all, create an admin key and print its secret once."""
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

    from queuelog.edge.app import create_app
    from queuelog.edge.serving import uvicorn_config

    settings = Settings()
    # The app's lifespan migrates these services' database and then makes the first admin
    # key, in the server's own event loop, before it takes a request.
    app = create_app(
        settings, open_services(settings), before_serving=_ensure_admin, settle_heap=True
    )
    print(f"queuelog on http://{args.host}:{args.port}/graphql", flush=True)

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


def cmd_keys(args: argparse.Namespace) -> int:
    s = _services()
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
            for k in asyncio.run(s.keys.list()):
                shown = "*" if k.allowed_types is None else ",".join(k.allowed_types)
                state = "revoked" if k.revoked_at else "live"
                print(f"{k.name}\t{k.role.value}\t{shown}\t{k.max_priority.name.lower()}\t{state}")
        elif args.keys_cmd == "revoke":
            if not asyncio.run(s.keys.revoke(args.name)):
                print(f"error: no live key named {args.name!r}", file=sys.stderr)
                return 1
            print(f"revoked {args.name!r}")
    finally:
        s.db.close()
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
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
    p = argparse.ArgumentParser(prog="queuelog", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    serve = sub.add_parser("serve", help="run the GraphQL server")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--log-level", default="info")
    serve.set_defaults(fn=cmd_serve)

    sub.add_parser("migrate", help="create or upgrade the schema").set_defaults(fn=cmd_migrate)

    keys = sub.add_parser("keys", help="manage API keys")
    keys_sub = keys.add_subparsers(dest="keys_cmd", required=True)
    create = keys_sub.add_parser("create", help="create a key and print its secret once")
    create.add_argument("--name", required=True)
    create.add_argument("--role", required=True, choices=[r.value for r in Role])
    create.add_argument("--types", help="comma-separated job types (default: all)")
    create.add_argument(
        "--max-priority", default="medium", choices=[p.name.lower() for p in Priority]
    )
    keys_sub.add_parser("list", help="list keys (never their secrets)")
    revoke = keys_sub.add_parser("revoke", help="revoke a key at once")
    revoke.add_argument("name")
    keys.set_defaults(fn=cmd_keys)

    pr = sub.add_parser("prune", help="delete finished jobs past their retention")
    pr.add_argument("--dry-run", action="store_true")
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
    except ValueError as exc:  # bad configuration, e.g. an unknown URL scheme
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
