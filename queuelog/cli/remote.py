"""The `queuelog` commands that talk to a running server: worker, enqueue, jobs.

Each takes --url and --key, or QUEUELOG_URL and QUEUELOG_KEY from the environment."""

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
    from queuelog.client import Client, Job
    from queuelog.worker import Worker

from queuelog.domain.lifecycle import Status

Command = Callable[[argparse.Namespace], int]


def _reporting(fn: Command) -> Command:
    """Print the server's refusal as `error: CODE: message` and exit 1."""

    @functools.wraps(fn)
    def run(args: argparse.Namespace) -> int:
        from queuelog.client import QueuelogError

        try:
            return fn(args)
        except QueuelogError as exc:
            print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
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


def _load_worker(target: str) -> Worker:
    from queuelog.worker import Worker

    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"expected MODULE:ATTRIBUTE, got {target!r}")
    sys.path.insert(0, os.getcwd())
    obj: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
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
    worker.run()
    return 0


@_reporting
def cmd_enqueue(args: argparse.Namespace) -> int:
    payload = json.loads(args.payload) if args.payload else None
    with _client(args) as client:
        job = client.enqueue(
            args.type,
            payload,
            priority=args.priority,
            idempotency_key=args.idempotency_key,
            delay=args.delay,
            max_retries=args.max_retries,
        )
    print(job.id)
    return 0


@_reporting
def cmd_jobs(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if args.jobs_cmd == "list":
            page = client.jobs(status=args.status, type=args.type, first=args.first)
            for j in page.jobs:
                created = j.created_at.isoformat(timespec="seconds")
                print(f"{j.id}\t{j.status.value}\t{j.type}\t{j.retry_count}\t{created}")
            if page.has_next_page:
                print(f"(more after {page.end_cursor})", file=sys.stderr)
        elif args.jobs_cmd == "show":
            job = client.job(args.id)
            if job is None:
                print(f"error: NOT_FOUND: no job {args.id}", file=sys.stderr)
                return 1
            print(_show(job))
        else:
            job = client.cancel(args.id) if args.jobs_cmd == "cancel" else client.retry(args.id)
            print(f"{job.id}\t{job.status.value}")
    return 0


def _connection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help="the GraphQL endpoint (default: QUEUELOG_URL)")
    p.add_argument("--key", help="the API key's secret (default: QUEUELOG_KEY)")


def register(sub: Any) -> None:
    """Add the server-facing subcommands to `queuelog`'s parser."""
    worker = sub.add_parser("worker", help="run a Worker defined in your code (MODULE:ATTRIBUTE)")
    worker.add_argument("target", metavar="MODULE:ATTRIBUTE")
    worker.add_argument("--concurrency", type=int)
    worker.add_argument(
        "--prefetch", type=int, help="jobs claimed ahead while handlers are quick (0: none)"
    )
    worker.add_argument("--types", help="comma-separated job types (default: every handler's)")
    _connection(worker)
    worker.set_defaults(fn=cmd_worker)

    enqueue = sub.add_parser("enqueue", help="enqueue a job; prints its id")
    enqueue.add_argument("type")
    enqueue.add_argument("--payload", help="a JSON object")
    enqueue.add_argument("--priority", choices=["low", "medium", "high", "critical"])
    enqueue.add_argument("--idempotency-key")
    enqueue.add_argument("--delay", type=float, help="seconds before it may run")
    enqueue.add_argument("--max-retries", type=int)
    _connection(enqueue)
    enqueue.set_defaults(fn=cmd_enqueue)

    jobs = sub.add_parser("jobs", help="list, show, cancel or retry jobs")
    jobs_sub = jobs.add_subparsers(dest="jobs_cmd", required=True)
    listing = jobs_sub.add_parser("list", help="newest first: id, status, type, retries, created")
    listing.add_argument("--status", choices=[s.value for s in Status])
    listing.add_argument("--type")
    listing.add_argument("--first", type=int, default=50)
    _connection(listing)
    for name, text in (("show", "print a job as JSON"), ("cancel", "cancel a job"),
                       ("retry", "retry a failed or cancelled job (admin)")):  # fmt: skip
        one = jobs_sub.add_parser(name, help=text)
        one.add_argument("id")
        _connection(one)
    jobs.set_defaults(fn=cmd_jobs)
