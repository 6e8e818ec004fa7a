"""The REST routes, the seed's design, for clients that speak no GraphQL: a thin adapter
over the same service as the GraphQL API. Each route takes the actor the authentication
middleware found, checks the capability `domain.roles` gives its operation, parses its
body with its model (`edge.rest_models`), makes one service call and renders the job.

`ENDPOINTS` is the one table of the routes: `routes()` serves it and `edge.openapi`
describes it. A refusal is `{"code", "message", …}` with the code GraphQL gives it, its
status from `STATUS`; the middlewares answer in the same shape (`edge.http.rest_error`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pydantic
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from queuelog.auth.backend import Principal, bearer
from queuelog.auth.permissions import UNAUTHENTICATED_MESSAGE, refusal
from queuelog.domain.codes import ErrorCode, UserErrorCode
from queuelog.domain.roles import Capability, may
from queuelog.edge.http import JSON, REST_PREFIX, rest_error
from queuelog.edge.rest_models import (
    PRIORITIES,
    STATUSES,
    ClaimBody,
    CompleteBody,
    EnqueueBody,
    FailBody,
    JobOut,
    JobPage,
    JobsQuery,
)
from queuelog.events.claims import ClaimArgs, claim_for
from queuelog.events.sessions import KeyRevoked
from queuelog.runtime import Services
from queuelog.service.errors import DomainError, NotFound
from queuelog.service.models import Actor, EnqueueRequest

log = logging.getLogger("queuelog.errors")

# The HTTP status of each code a REST route answers with.
STATUS: dict[str, int] = {
    ErrorCode.BAD_REQUEST: 400,
    ErrorCode.UNAUTHENTICATED: 401,
    ErrorCode.FORBIDDEN: 403,
    UserErrorCode.NOT_FOUND: 404,
    ErrorCode.METHOD_NOT_ALLOWED: 405,
    UserErrorCode.INVALID_STATE: 409,
    UserErrorCode.NOT_JOB_OWNER: 409,
    UserErrorCode.IDEMPOTENCY_KEY_REUSED: 409,
    UserErrorCode.PAYLOAD_TOO_LARGE: 413,
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: 415,
    ErrorCode.BAD_USER_INPUT: 422,
    UserErrorCode.VALIDATION_FAILED: 422,
    UserErrorCode.JOB_TYPE_NOT_ALLOWED: 422,
    UserErrorCode.PRIORITY_NOT_ALLOWED: 422,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.INTERNAL_SERVER_ERROR: 500,
    ErrorCode.EXECUTION_TIMEOUT: 503,
}
# Every route may answer these (the middlewares' and the adapter's own refusals).
COMMON = (
    ErrorCode.BAD_REQUEST,
    ErrorCode.UNAUTHENTICATED,
    ErrorCode.FORBIDDEN,
    ErrorCode.BAD_USER_INPUT,
    UserErrorCode.PAYLOAD_TOO_LARGE,
    ErrorCode.UNSUPPORTED_MEDIA_TYPE,
    ErrorCode.RATE_LIMITED,
    ErrorCode.INTERNAL_SERVER_ERROR,
    ErrorCode.EXECUTION_TIMEOUT,
)


class Refused(Exception):
    """A request the adapter itself refuses before any service call."""

    def __init__(self, code: str, message: str, field: list[str] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.field = code, message, field


@dataclass(frozen=True, slots=True)
class Call:
    """One request as its handler gets it: parsed and authorized."""

    services: Services
    request: Request
    actor: Actor
    body: Any  # the endpoint's body model, or None
    query: Any  # the endpoint's query model, or None
    job_id: int | None


Handler = Callable[[Call], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class Endpoint:
    method: str
    path: str
    name: str  # the OpenAPI operationId
    summary: str
    capability: Capability
    handler: Handler
    answers: dict[int, type[BaseModel] | None]  # success statuses, None: no body
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    refusals: tuple[str, ...] = field(default=())  # codes of its own beyond COMMON


def _json(model: BaseModel, status: int = 200) -> Response:
    return Response(model.model_dump_json(), status, media_type=JSON)


async def enqueue(call: Call) -> Response:
    b: EnqueueBody = call.body
    request = EnqueueRequest(
        b.type,
        {} if b.payload is None else b.payload,
        PRIORITIES[b.priority],
        b.max_retries,
        b.idempotency_key,
        b.run_at,
        b.delay_seconds,
        b.concurrency_key,
    )
    job, created = await call.services.service.enqueue(call.actor, request)
    return _json(JobOut.of(job), 201 if created else 200)


async def list_jobs(call: Call) -> Response:
    q: JobsQuery = call.query
    page = await call.services.service.page(
        call.actor,
        status=None if q.status is None else STATUSES[q.status],
        job_type=q.type,
        first=q.limit,
        after=q.after,
        total=False,
    )
    cursor = str(page.jobs[-1].id) if page.jobs and page.has_next else None
    jobs = [JobOut.of(j) for j in page.jobs]
    return _json(JobPage.model_construct(jobs=jobs, has_next=page.has_next, next_cursor=cursor))


async def get_job(call: Call) -> Response:
    assert call.job_id is not None
    job = await call.services.service.get(call.actor, call.job_id)
    if job is None:
        raise NotFound(f"no job {call.job_id}")
    return _json(JobOut.of(job))


async def claim(call: Call) -> Response:
    b: ClaimBody = call.body
    request = call.request

    async def gone() -> None:
        """Ends when the client disconnects (its body was read already)."""
        while (await request.receive())["type"] != "http.disconnect":
            pass

    s = call.services
    token = bearer(request.headers.get("authorization")) or ""

    async def key_live() -> bool:
        return await s.keys.verify(token) is not None

    args = ClaimArgs(b.types, b.lease_seconds, 1, b.wait_seconds)
    try:
        jobs = await claim_for(s.service, s.feed, s.job_types, call.actor, args, gone, key_live)
    except KeyRevoked as exc:
        raise Refused(ErrorCode.UNAUTHENTICATED, str(exc)) from None
    return _json(JobOut.of(jobs[0])) if jobs else Response(status_code=204)


async def complete(call: Call) -> Response:
    assert call.job_id is not None
    b: CompleteBody = call.body
    return _json(JobOut.of(await call.services.service.complete(call.actor, call.job_id, b.result)))


async def fail(call: Call) -> Response:
    assert call.job_id is not None
    b: FailBody = call.body
    job, _ = await call.services.service.fail(call.actor, call.job_id, b.error, b.retryable)
    return _json(JobOut.of(job))


_SETTLE = (
    UserErrorCode.NOT_FOUND,
    UserErrorCode.INVALID_STATE,
    UserErrorCode.NOT_JOB_OWNER,
    UserErrorCode.VALIDATION_FAILED,
)
JOB = "/jobs/{id}"
ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(
        "POST", "/jobs", "enqueueJob", "Enqueue a job", Capability.ENQUEUE, enqueue,
        {201: JobOut, 200: JobOut}, body=EnqueueBody,
        refusals=(UserErrorCode.VALIDATION_FAILED, UserErrorCode.JOB_TYPE_NOT_ALLOWED,
                  UserErrorCode.PRIORITY_NOT_ALLOWED, UserErrorCode.IDEMPOTENCY_KEY_REUSED),
    ),
    Endpoint(
        "GET", "/jobs", "listJobs", "The jobs this key may see, newest first",
        Capability.ANY, list_jobs, {200: JobPage}, query=JobsQuery,
        refusals=(UserErrorCode.VALIDATION_FAILED,),
    ),
    # Before /jobs/{id}, so that `claim` is never read as an id.
    Endpoint(
        "POST", "/jobs/claim", "claimJob", "Claim the most urgent job (204: none)",
        Capability.WORK, claim, {200: JobOut, 204: None}, body=ClaimBody,
        refusals=(UserErrorCode.VALIDATION_FAILED, UserErrorCode.JOB_TYPE_NOT_ALLOWED),
    ),
    Endpoint(
        "GET", JOB, "getJob", "One job, if this key may see it", Capability.ANY, get_job,
        {200: JobOut}, refusals=(UserErrorCode.NOT_FOUND,),
    ),
    Endpoint(
        "POST", JOB + "/complete", "completeJob", "Complete a job this worker holds",
        Capability.WORK, complete, {200: JobOut}, body=CompleteBody, refusals=_SETTLE,
    ),
    Endpoint(
        "POST", JOB + "/fail", "failJob", "Report a failed attempt (retried while retries remain)",
        Capability.WORK, fail, {200: JobOut}, body=FailBody, refusals=_SETTLE,
    ),
)  # fmt: skip
assert all(e.path.startswith(REST_PREFIX) for e in ENDPOINTS), "edge.http.is_rest covers them"


def _error(
    code: str, message: str, headers: dict[str, str] | None = None, **extra: Any
) -> Response:
    return rest_error(STATUS[code], message, code, headers, **extra)


def _actor(request: Request, capability: Capability) -> Actor:
    user = request.scope.get("user")
    if not isinstance(user, Principal):
        raise Refused(ErrorCode.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE)
    if not may(user.actor.role, capability):
        raise Refused(ErrorCode.FORBIDDEN, refusal(user.actor.role, capability))
    return user.actor


def _job_id(request: Request) -> int | None:
    text = request.path_params.get("id")
    if text is None:
        return None
    if not (text.isascii() and text.isdigit() and len(text) <= 18):
        raise NotFound(f"no job {text}", ["id"])
    return int(text)


def _invalid(exc: pydantic.ValidationError, where: str) -> Refused:
    first = exc.errors(include_url=False)[0]
    path = [str(p) for p in first["loc"]]
    at = f"{where} field {'.'.join(path)}" if path else f"the {where}"
    return Refused(ErrorCode.BAD_USER_INPUT, f"{at}: {first['msg']}", path or None)


async def _body(request: Request, model: type[BaseModel] | None) -> BaseModel | None:
    raw = await request.body()
    if model is None or not raw.strip():
        return None if model is None else _parsed(model, b"{}")
    media = request.headers.get("content-type", JSON).partition(";")[0].strip().lower()
    if media != JSON:
        raise Refused(ErrorCode.UNSUPPORTED_MEDIA_TYPE, f"send the body as {JSON}")
    return _parsed(model, raw)


def _parsed(model: type[BaseModel], raw: bytes) -> BaseModel:
    try:
        return model.model_validate_json(raw)
    except pydantic.ValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors()):
            raise Refused(ErrorCode.BAD_REQUEST, "the body is not JSON") from None
        raise _invalid(exc, "body") from None


def _query(request: Request, model: type[BaseModel] | None) -> BaseModel | None:
    if model is None:
        return None
    params = request.query_params
    repeated = next((k for k in params if len(params.getlist(k)) > 1), None)
    if repeated is not None:
        raise Refused(ErrorCode.BAD_USER_INPUT, f"give {repeated} once", [repeated])
    try:
        return model.model_validate(dict(params))
    except pydantic.ValidationError as exc:
        raise _invalid(exc, "query") from None


# The service names the inputs as GraphQL does; a REST client is told its own names.
_FIELDS = {"input": None, "first": "limit", "leaseSeconds": "lease_seconds"}
_FIELDS |= {"waitSeconds": "wait_seconds", "maxRetries": "max_retries", "runAt": "run_at"}
_FIELDS |= {"idempotencyKey": "idempotency_key", "delaySeconds": "delay_seconds"}
_FIELDS |= {"concurrencyKey": "concurrency_key"}


def _rest_field(path: list[str] | None) -> list[str] | None:
    if path is None:
        return None
    names = (_FIELDS.get(p, p) for p in path)
    return [n for n in names if n is not None]


def _refusal(exc: DomainError) -> Response:
    extra: dict[str, Any] = {"field": _rest_field(exc.field)}
    if exc.job is not None:
        extra["job"] = JobOut.of(exc.job).model_dump(mode="json")
    return _error(exc.code, exc.message, **extra)


def _serve(services: Services, endpoint: Endpoint) -> Callable[[Request], Awaitable[Response]]:
    timeout = services.settings.execution_timeout_seconds

    async def serve(request: Request) -> Response:
        try:
            actor = _actor(request, endpoint.capability)
            query = _query(request, endpoint.query)
            # Outside the catch-all below: the body limit's middleware stops an oversized
            # body by raising through this read.
            body = await _body(request, endpoint.body)
            call = Call(services, request, actor, body, query, _job_id(request))
            return await run(call)
        except Refused as exc:
            headers = None
            if exc.code == ErrorCode.UNAUTHENTICATED:
                headers = {"WWW-Authenticate": 'Bearer realm="queuelog"'}
            return _error(exc.code, exc.message, headers, field=exc.field)
        except DomainError as exc:
            return _refusal(exc)

    async def run(call: Call) -> Response:
        """The handler within the execution timeout; a fault masked, with the request id."""
        try:
            async with asyncio.timeout(timeout):
                return await endpoint.handler(call)
        except DomainError:
            raise
        except TimeoutError:
            message = f"the request took longer than {timeout:g} s; retry later"
            return _error(ErrorCode.EXECUTION_TIMEOUT, message)
        except Exception:
            rid = call.request.scope.get("state", {}).get("request_id")
            log.exception("unexpected error (request %s) at %s", rid, endpoint.name)
            return _error(ErrorCode.INTERNAL_SERVER_ERROR, "Internal server error", requestId=rid)

    return serve


def routes(services: Services) -> list[BaseRoute]:
    """A route per path of `ENDPOINTS`, in its order; a method it does not serve is 405 and a
    path under /jobs it does not know 404, both in the REST shape."""
    by_path: dict[str, dict[str, Callable[[Request], Awaitable[Response]]]] = {}
    for e in ENDPOINTS:
        by_path.setdefault(e.path, {})[e.method] = _serve(services, e)
    out: list[BaseRoute] = [Route(p, _ByMethod(m)) for p, m in by_path.items()]
    return [*out, Route(REST_PREFIX + "/{rest:path}", _ByMethod({}))]


class _ByMethod:
    """An ASGI app for one path (so that Starlette routes every method to it): the handler
    of the request's method, else 405, or 404 for a path that serves none."""

    def __init__(self, served: dict[str, Callable[[Request], Awaitable[Response]]]) -> None:
        self.served = served
        self.allow = ", ".join(served)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        handler = self.served.get(request.method)
        if handler is not None:
            response = await handler(request)
        elif not self.served:
            response = _error(UserErrorCode.NOT_FOUND, f"no route {request.url.path}")
        else:
            message = f"{request.method} is not served here; use {self.allow}"
            response = _error(ErrorCode.METHOD_NOT_ALLOWED, message, {"Allow": self.allow})
        await response(scope, receive, send)
