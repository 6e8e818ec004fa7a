"""GET /healthz (the process answers) and GET /readyz (the database answers and its schema
is at this code's newest migration), both without a key: for load balancers and
orchestrators. /readyz also says which fences serve (`queuelog.fences.states`)."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from queuelog import fences
from queuelog.config import Settings
from queuelog.storage.db import Database
from queuelog.storage.migrate import database_revision, head_revision

log = logging.getLogger("queuelog.edge.health")


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


class Readiness:
    """GET /readyz: 200 when this process can serve, 503 with the reason otherwise."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.head = head_revision()
        # Which fences serve in this process: their state does not change while it runs.
        self.fences = fences.states(settings)

    async def respond(self, request: Request) -> Response:
        try:
            revision = await self.db.read(database_revision)
        except Exception as exc:
            log.warning("readiness: the database does not answer: %s", type(exc).__name__)
            return JSONResponse({"status": "unavailable", "reason": "database"}, 503)
        if revision != self.head:
            body = {
                "status": "unavailable",
                "reason": "migrations",
                "database": revision,
                "expected": self.head,
            }
            return JSONResponse(body, 503)
        return JSONResponse({"status": "ok", "migration": revision, "fences": self.fences})
