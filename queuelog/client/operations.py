"""The GraphQL documents the clients send, and how their answers become typed results.

Each function returns an `Operation`: the document, its variables, and a parser of the
answer's `data`; the sync and async clients only differ in how they send it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar

from queuelog.client.models import (
    BadResponse,
    Failed,
    Job,
    JobPage,
    QueuelogError,
    UserError,
)
from queuelog.domain.codes import ClientCode, UserErrorCode

T = TypeVar("T")
A = TypeVar("A")

JOB_FIELDS = """id type payload priority status retryCount maxRetries idempotencyKey producer
runAt claimedAt workerId leaseExpiresAt error result createdAt updatedAt finishedAt"""
# A job without its result, error and progress: what lists of jobs (enqueued, claimed, a
# page) carry, so that they stay within the server's response-size limit; `job(id)` reads
# the rest.
HELD_FIELDS = """id type payload priority status retryCount maxRetries producer runAt claimedAt
workerId leaseExpiresAt createdAt updatedAt finishedAt"""
ERRORS = "userErrors { code message field }"

# What the server's schema offers beyond the first contract, read once by introspection.
FEATURES = """{ m: __type(name: "Mutation") { fields { name args { name } } }
  j: __type(name: "Job") { fields { name } }
  s: __type(name: "Subscription") { fields { name } } }"""


@dataclass(frozen=True, slots=True)
class Features:
    wait_seconds: bool = False
    progress: bool = False
    report_jobs: bool = False  # reportJobs; else outcomes go as aliased completeJob/failJob

    CURRENT: ClassVar[Features]

    @classmethod
    def of(cls, data: dict[str, Any]) -> Features:
        mutations = {f["name"]: {a["name"] for a in f["args"]} for f in data["m"]["fields"]}
        job_fields = {f["name"] for f in data["j"]["fields"]}
        subscriptions = {f["name"] for f in data["s"]["fields"]}
        return cls(
            wait_seconds="waitSeconds" in mutations.get("claimJobs", set()),
            progress="progress" in job_fields
            and "progress" in mutations.get("heartbeatJob", set())
            and "jobProgress" in subscriptions,
            report_jobs="reportJobs" in mutations,
        )

    def job_fields(self) -> str:
        return JOB_FIELDS + (" progress" if self.progress else "")


Features.CURRENT = Features(wait_seconds=True, progress=True, report_jobs=True)


@dataclass(frozen=True, slots=True)
class Operation(Generic[T]):
    query: str
    variables: dict[str, Any]
    parse: Callable[[dict[str, Any]], T]


# What reading an answer that lacks the fields asked for, or holds values of the wrong
# kind, raises.
_MALFORMED = (KeyError, IndexError, TypeError, ValueError, AttributeError)


def read(parse: Callable[[dict[str, Any]], A], data: dict[str, Any]) -> A:
    """`parse(data)`: an answer read; BadResponse when it is not what was asked for."""
    try:
        return parse(data)
    except QueuelogError:
        raise
    except _MALFORMED as exc:
        raise BadResponse(f"a malformed answer: {type(exc).__name__}: {exc!s:.200}") from None


def refusal(out: dict[str, Any]) -> UserError | None:
    """The payload's first userError, if it has one."""
    errors = out.get("userErrors") or []
    if not errors:
        return None
    first = errors[0]
    job = None if out.get("job") is None else Job.of(out["job"])
    return UserError(first["code"], first["message"], first.get("field"), job)


def mutation_payload(data: dict[str, Any], field: str) -> dict[str, Any]:
    """The mutation's payload; its first userError raised as `UserError`."""
    out: dict[str, Any] = data[field]
    refused = refusal(out)
    if refused is not None:
        raise refused
    return out


def enqueue_input(
    type: str,
    payload: Mapping[str, Any] | None = None,
    *,
    priority: str | None = None,
    idempotency_key: str | None = None,
    run_at: datetime | None = None,
    delay: float | None = None,
    max_retries: int | None = None,
    concurrency_key: str | None = None,
) -> dict[str, Any]:
    """An EnqueueJobInput; arguments left None take the server's defaults. A payload that
    is not a JSON object is refused here, as the server would refuse it."""
    if payload is not None and not isinstance(payload, Mapping):
        raise UserError(
            UserErrorCode.VALIDATION_FAILED, "payload must be a JSON object", ["input", "payload"]
        )
    fields: dict[str, Any] = {"type": type, "payload": dict(payload or {})}
    if priority is not None:
        fields["priority"] = str(priority).upper()
    if idempotency_key is not None:
        fields["idempotencyKey"] = idempotency_key
    if run_at is not None:
        fields["runAt"] = run_at.isoformat()
    if delay is not None:
        fields["delaySeconds"] = round(delay)
    if max_retries is not None:
        fields["maxRetries"] = max_retries
    if concurrency_key is not None:
        fields["concurrencyKey"] = concurrency_key
    return fields


def enqueue(f: Features, job_input: dict[str, Any]) -> Operation[tuple[Job, bool]]:
    query = f"""mutation($input: EnqueueJobInput!) {{
      enqueueJob(input: $input) {{ job {{ {HELD_FIELDS} idempotencyKey }} created {ERRORS} }} }}"""

    def parse(data: dict[str, Any]) -> tuple[Job, bool]:
        out = mutation_payload(data, "enqueueJob")
        return Job.of(out["job"]), bool(out["created"])

    return Operation(query, {"input": job_input}, parse)


def enqueue_many(f: Features, inputs: list[dict[str, Any]]) -> Operation[list[Job]]:
    query = f"""mutation($inputs: [EnqueueJobInput!]!) {{
      enqueueJobs(inputs: $inputs) {{ jobs {{ {HELD_FIELDS} idempotencyKey }} {ERRORS} }} }}"""
    return Operation(
        query,
        {"inputs": inputs},
        lambda data: [Job.of(j) for j in mutation_payload(data, "enqueueJobs")["jobs"]],
    )


def job(f: Features, job_id: str) -> Operation[Job | None]:
    query = f"query($id: ID!) {{ job(id: $id) {{ {f.job_fields()} }} }}"

    def parse(data: dict[str, Any]) -> Job | None:
        return None if data["job"] is None else Job.of(data["job"])

    return Operation(query, {"id": str(job_id)}, parse)


def jobs(
    f: Features, status: str | None, type: str | None, first: int, after: str | None
) -> Operation[JobPage]:
    query = f"""query($status: JobStatus, $type: String, $first: Int, $after: String) {{
      jobs(status: $status, type: $type, first: $first, after: $after) {{
        nodes {{ {HELD_FIELDS} idempotencyKey }} pageInfo {{ hasNextPage endCursor }} }} }}"""

    def parse(data: dict[str, Any]) -> JobPage:
        page = data["jobs"]
        return JobPage(
            [Job.of(j) for j in page["nodes"]],
            page["pageInfo"]["hasNextPage"],
            page["pageInfo"]["endCursor"],
        )

    variables = {"status": status and status.upper(), "type": type, "first": first, "after": after}
    return Operation(query, variables, parse)


def _job_mutation(f: Features, name: str, job_id: str) -> Operation[Job]:
    query = f"mutation($id: ID!) {{ {name}(id: $id) {{ job {{ {f.job_fields()} }} {ERRORS} }} }}"
    return Operation(
        query, {"id": str(job_id)}, lambda data: Job.of(mutation_payload(data, name)["job"])
    )


def cancel(f: Features, job_id: str) -> Operation[Job]:
    return _job_mutation(f, "cancelJob", job_id)


def retry(f: Features, job_id: str) -> Operation[Job]:
    return _job_mutation(f, "retryJob", job_id)


# -- the worker's side ---------------------------------------------------------------------


def claim(
    f: Features,
    limit: int,
    types: list[str] | None,
    lease_seconds: int | None,
    wait_seconds: int,
) -> Operation[list[Job]]:
    wait = wait_seconds if f.wait_seconds else 0
    declared, passed = (", $wait: Int", ", waitSeconds: $wait") if wait else ("", "")
    query = f"""mutation($limit: Int!, $types: [String!], $lease: Int{declared}) {{
      claimJobs(limit: $limit, types: $types, leaseSeconds: $lease{passed}) {{
        jobs {{ {HELD_FIELDS} }} {ERRORS} }} }}"""
    variables: dict[str, Any] = {"limit": limit, "types": types, "lease": lease_seconds}
    if wait:
        variables["wait"] = wait
    return Operation(
        query,
        variables,
        lambda data: [Job.of(j) for j in mutation_payload(data, "claimJobs")["jobs"]],
    )


_UNSET: Any = object()


def heartbeat(
    f: Features, job_id: str, lease_seconds: int | None, progress: Any = _UNSET
) -> Operation[Job]:
    send_progress = f.progress and progress is not _UNSET
    declared, passed = (", $progress: JSON", ", progress: $progress") if send_progress else ("", "")
    query = f"""mutation($id: ID!, $lease: Int{declared}) {{
      heartbeatJob(id: $id, leaseSeconds: $lease{passed}) {{
        job {{ {HELD_FIELDS} }} {ERRORS} }} }}"""
    variables: dict[str, Any] = {"id": str(job_id), "lease": lease_seconds}
    if send_progress:
        variables["progress"] = progress
    return Operation(
        query, variables, lambda data: Job.of(mutation_payload(data, "heartbeatJob")["job"])
    )


def complete(f: Features, job_id: str, result: Any) -> Operation[Job]:
    query = f"""mutation($id: ID!, $result: JSON) {{
      completeJob(id: $id, result: $result) {{ job {{ {HELD_FIELDS} result }} {ERRORS} }} }}"""
    return Operation(
        query,
        {"id": str(job_id), "result": result},
        lambda data: Job.of(mutation_payload(data, "completeJob")["job"]),
    )


def fail(f: Features, job_id: str, error: str, retryable: bool) -> Operation[Failed]:
    query = f"""mutation($id: ID!, $error: String!, $retryable: Boolean) {{
      failJob(id: $id, error: $error, retryable: $retryable) {{
        job {{ {HELD_FIELDS} }} willRetry {ERRORS} }} }}"""

    def parse(data: dict[str, Any]) -> Failed:
        out = mutation_payload(data, "failJob")
        return Failed(Job.of(out["job"]), bool(out["willRetry"]))

    return Operation(query, {"id": str(job_id), "error": error, "retryable": retryable}, parse)


def answer(body: Any) -> dict[str, Any]:
    """The `data` of a GraphQL response; its first top-level error raised with its code."""
    if not isinstance(body, dict):
        raise BadResponse(f"not a GraphQL response: {body!r:.200}")
    errors = body.get("errors")
    if errors:
        first = errors[0] if isinstance(errors, list) else None
        extensions = first.get("extensions") if isinstance(first, dict) else None
        if not isinstance(first, dict) or not isinstance(extensions, dict | None):
            raise BadResponse(f"not a GraphQL error: {errors!r:.200}")
        code = (extensions or {}).get("code") or ClientCode.GRAPHQL_ERROR
        raise QueuelogError(str(code), str(first.get("message", "")))
    data = body.get("data")
    if not isinstance(data, dict):
        raise BadResponse("a GraphQL response without data")
    return data
