"""The `queuelog` commands that talk to a running server: worker, enqueue, jobs.

Each takes --url and --key, or QUEUELOG_URL and QUEUELOG_KEY from the environment. Each
refusal is printed with the option or setting that fixes it."""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when a command runs, so that `queuelog serve` starts without them
    from queuelog.client import Client, Job, QueuelogError
    from queuelog.worker import Worker

from queuelog.domain.lifecycle import Status

Command = Callable[[argparse.Namespace], int]
PRIORITIES = ("low", "medium", "high", "critical")
EXAMPLE_URL = "http://127.0.0.1:8000/graphql"
# The option of each enqueue input field a refusal may name.
OPTIONS = {
    "type": "TYPE",
    "payload": "--payload",
    "priority": "--priority",
    "idempotencyKey": "--idempotency-key",
    "delaySeconds": "--delay",
    "maxRetries": "--max-retries",
    "first": "--limit",
    "after": "--after",
    "id": "ID",
}


def _url(args: argparse.Namespace) -> str:
    from queuelog.client.clients import DEFAULT_URL

    return str(args.url or os.environ.get("QUEUELOG_URL") or DEFAULT_URL)


def _has_key(args: argparse.Namespace) -> bool:
    return bool(args.key or os.environ.get("QUEUELOG_KEY"))


def explain(exc: QueuelogError, args: argparse.Namespace) -> str:
    """The refusal as the CLI prints it: the server's words, then what to change."""
    code, message = str(exc.code), exc.message
    # The input at fault: the refusal's field, or the argument its message starts with.
    field = exc.field[-1] if exc.field else message.split(" ", 1)[0]
    hint = ""
    if code == "UNAUTHENTICATED":
        if not _has_key(args):
            message = "no API key was given"
            hint = "pass the key's secret with --key, or set QUEUELOG_KEY"
        else:
            hint = "check the secret given by --key or QUEUELOG_KEY (queuelog keys list)"
    elif code == "FORBIDDEN":
        hint = "use a key whose role may do this, with --key or QUEUELOG_KEY"
    elif code == "JOB_TYPE_NOT_ALLOWED":
        if "not configured" in message:
            hint = "" if "QUEUELOG_JOB_TYPES" in message else "see the server's QUEUELOG_JOB_TYPES"
        elif args.cmd == "worker":
            hint = "pass --types with only the types this key may use, or use a key allowed them"
        else:
            hint = "use a key allowed this type (--key or QUEUELOG_KEY; keys create --types)"
    elif code == "PRIORITY_NOT_ALLOWED":
        hint = "pass a lower --priority, or use a key with a higher --max-priority"
    elif code in ("CONNECTION_FAILED",):
        hint = f"no queuelog server answered at {_url(args)}: check --url or QUEUELOG_URL"
    elif code.startswith("HTTP_") or code == "BAD_RESPONSE":
        message = f"{_url(args)} is not a queuelog GraphQL endpoint ({message})"
        hint = f"--url or QUEUELOG_URL must be the server's /graphql, e.g. {EXAMPLE_URL}"
    elif code == "RATE_LIMITED":
        hint = "try again shortly"
    elif field in OPTIONS and code != "INVALID_STATE":  # the job's state, not the input
        hint = f"check {OPTIONS[field]}"
    return f"{code}: {message}" + (f"\n  hint: {hint}" if hint else "")


def _reporting(fn: Command) -> Command:
    """Print the server's refusal as `error: CODE: message` and a hint, and exit 1."""

    @functools.wraps(fn)
    def run(args: argparse.Namespace) -> int:
        from queuelog.client import QueuelogError

        try:
            return fn(args)
        except QueuelogError as exc:
            print(f"error: {explain(exc, args)}", file=sys.stderr)
            return 1

    return run


def _client(args: argparse.Namespace) -> Client:
    from queuelog.client import Client

    return Client(args.url, args.key)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON: {value!r}")


def _show(job: Job) -> str:
    return json.dumps(asdict(job), default=_json_default, indent=2)


def payload(text: str | None) -> dict[str, Any] | None:
    """--payload's JSON object; anything else is refused as the server would refuse it."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--payload is not JSON ({exc}); e.g. --payload '{{\"n\": 1}}'") from None
    if not isinstance(value, dict):
        raise ValueError("--payload: payload must be a JSON object, e.g. --payload '{\"n\": 1}'")
    return value


def _load_worker(target: str) -> Worker:
    from queuelog.worker import Worker

    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"expected MODULE:ATTRIBUTE, got {target!r}")
    sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not module_name.startswith(exc.name):
            raise  # the module is there; one it imports is not
        raise ValueError(
            f"no module {module_name!r} (MODULE of MODULE:ATTRIBUTE): run from the directory "
            "that holds it, or add that directory to PYTHONPATH"
        ) from None
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{module_name} has no {attribute!r} (ATTRIBUTE of MODULE:ATTRIBUTE)")
        obj = getattr(obj, part)
    if not isinstance(obj, Worker):
        raise ValueError(f"{target} is a {type(obj).__name__}, not a queuelog.worker.Worker")
    return obj


@_reporting
def cmd_worker(args: argparse.Namespace) -> int:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("queuelog").setLevel(logging.INFO)
    worker = _load_worker(args.target)
    if args.url:
        worker.url = args.url
    if args.key:
        worker.key = args.key
    if args.concurrency is not None:
        worker.concurrency = args.concurrency
    if args.prefetch is not None:
        worker.prefetch = args.prefetch
    if args.types is not None:
        worker.types = [t for t in args.types.split(",") if t]
    try:
        worker.claimed_types()
    except ValueError as exc:
        handled = ",".join(sorted(worker.handlers)) or "none"
        raise ValueError(f"{exc}: --types may name only types with a handler ({handled})") from None
    worker.run()
    return 0


@_reporting
def cmd_enqueue(args: argparse.Namespace) -> int:
    with _client(args) as client:
        job = client.enqueue(
            args.type,
            payload(args.payload),
            priority=args.priority,
            idempotency_key=args.idempotency_key,
            delay=args.delay,
            max_retries=args.max_retries,
        )
    print(job.id)
    return 0


def _next_page(args: argparse.Namespace, cursor: str) -> str:
    """The command that lists the next page, with this one's filters."""
    parts = ["queuelog jobs list"]
    if args.status:
        parts.append(f"--status {args.status}")
    if args.type:
        parts.append(f"--type {args.type}")
    if args.limit != LIST_LIMIT:
        parts.append(f"--limit {args.limit}")
    return " ".join([*parts, f"--after {cursor}"])


@_reporting
def cmd_jobs(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if args.jobs_cmd == "list":
            page = client.jobs(
                status=args.status, type=args.type, first=args.limit, after=args.after
            )
            for j in page.jobs:
                created = j.created_at.isoformat(timespec="seconds")
                print(f"{j.id}\t{j.status.value}\t{j.type}\t{j.retry_count}\t{created}")
            if page.has_next_page and page.end_cursor is not None:
                print(f"(more: {_next_page(args, page.end_cursor)})", file=sys.stderr)
        elif args.jobs_cmd == "show":
            job = client.job(args.id)
            if job is None:
                print(f"error: NOT_FOUND: no job {args.id} that this key may see", file=sys.stderr)
                return 1
            print(_show(job))
        else:
            job = client.cancel(args.id) if args.jobs_cmd == "cancel" else client.retry(args.id)
            print(f"{job.id}\t{job.status.value}")
    return 0


LIST_LIMIT = 50


def _connection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help=f"the GraphQL endpoint (default: QUEUELOG_URL, or {EXAMPLE_URL})")
    p.add_argument("--key", help="the API key's secret (default: QUEUELOG_KEY)")


def register(sub: Any) -> None:
    """Add the server-facing subcommands to `queuelog`'s parser."""
    worker = sub.add_parser("worker", help="run a Worker defined in your code (MODULE:ATTRIBUTE)")
    worker.add_argument("target", metavar="MODULE:ATTRIBUTE", help="e.g. myapp.jobs:worker")
    worker.add_argument("--concurrency", type=int, help="handlers run at once")
    worker.add_argument(
        "--prefetch", type=int, help="jobs claimed ahead while handlers are quick (0: none)"
    )
    worker.add_argument("--types", help="comma-separated job types (default: every handler's)")
    _connection(worker)
    worker.set_defaults(fn=cmd_worker)

    enqueue = sub.add_parser("enqueue", help="enqueue a job; prints its id")
    enqueue.add_argument("type", metavar="TYPE", help="the job type, one of the server's")
    enqueue.add_argument("--payload", help='a JSON object, e.g. \'{"to": "a@example.com"}\'')
    enqueue.add_argument("--priority", type=str.lower, choices=PRIORITIES)
    enqueue.add_argument(
        "--idempotency-key", help="enqueue once per key: a repeat answers the same job"
    )
    enqueue.add_argument("--delay", type=float, help="seconds before it may run")
    enqueue.add_argument("--max-retries", type=int, help="retries after a failure")
    _connection(enqueue)
    enqueue.set_defaults(fn=cmd_enqueue)

    jobs = sub.add_parser("jobs", help="list, show, cancel or retry jobs")
    jobs_sub = jobs.add_subparsers(dest="jobs_cmd", required=True)
    listing = jobs_sub.add_parser("list", help="newest first: id, status, type, retries, created")
    listing.add_argument(
        "--status", type=str.upper, choices=[s.value.upper() for s in Status], help="any case"
    )
    listing.add_argument("--type")
    listing.add_argument(
        "--limit", "--first", type=int, default=LIST_LIMIT, help="jobs per page (%(default)s)"
    )
    listing.add_argument("--after", metavar="CURSOR", help="the page after this cursor")
    _connection(listing)
    for name, text in (("show", "print a job as JSON"), ("cancel", "cancel a job"),
                       ("retry", "retry a failed or cancelled job (admin)")):  # fmt: skip
        one = jobs_sub.add_parser(name, help=text)
        one.add_argument("id", metavar="ID")
        _connection(one)
    jobs.set_defaults(fn=cmd_jobs)
