"""The server's logging: plain text by default, or with QUEUELOG_LOG_FORMAT=json one JSON
object per line carrying the request's id, its GraphQL operation and the name of the API key
that sent it (never the key's secret, a payload, variables or a job's error text).

A request's details live in `CURRENT`, set for the whole of the request by
`queuelog.edge.requests`; every line logged while it runs (uvicorn's access line included)
carries them. Details that are known only later (the key, once authenticated; the operation,
once the body is read) are looked up when a line is written."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.types import Scope

from queuelog.auth.backend import Principal


class RequestInfo:
    """One request's details for its log lines."""

    __slots__ = ("operation", "scope")

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        # The operation's label (see `queuelog.edge.requests`), resolved when first asked.
        self.operation: Callable[[], str | None] = lambda: None

    @property
    def request_id(self) -> str | None:
        request_id: str | None = self.scope.get("state", {}).get("request_id")
        return request_id

    @property
    def key(self) -> str | None:
        user = self.scope.get("user")
        return user.actor.name if isinstance(user, Principal) else None


CURRENT: ContextVar[RequestInfo | None] = ContextVar("queuelog_request", default=None)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the request's details
    when one is running, and the traceback of a fault."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        if record.name == "uvicorn.access" and isinstance(record.args, tuple):
            entry.update(_access(record.args))
        else:
            entry["message"] = record.getMessage()
        info = CURRENT.get()
        if info is not None:
            entry["request_id"] = info.request_id
            entry["operation"] = info.operation()
            entry["key"] = info.key
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


def _access(args: tuple[Any, ...]) -> dict[str, Any]:
    """uvicorn's access line as fields; the path without its query string, which may hold
    a GET request's variables."""
    try:
        client, method, path, _version, status = args
    except ValueError:
        return {"message": " ".join(map(str, args))}
    path = str(path).partition("?")[0]
    return {
        "message": f"{method} {path} {status}",
        "method": method,
        "path": path,
        "status": status,
        "client": client,
    }


def json_log_config(level: str) -> dict[str, Any]:
    """A `logging.config.dictConfig` that writes uvicorn's and queuelog's lines as JSON."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    loggers: dict[str, Any] = {
        name: {"handlers": ["json"], "level": level.upper(), "propagate": False}
        for name in ("uvicorn", "uvicorn.access", "queuelog")
    }
    loggers["uvicorn.error"] = {"level": level.upper()}  # propagates to "uvicorn"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {"json": handler},
        "loggers": loggers,
    }
