"""The documents that report a worker's outcomes: one reportJobs field (or, from a server
without it, several aliased completeJob and failJob fields), optionally followed by a claim
that answers at once, with their answers in full (`settle`) or brief (`report`: the job's
id and status)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from queuelog.client.models import Failed, Job, JobStatus, Reported, Settlement, UserError
from queuelog.client.operations import (
    ERRORS,
    HELD_FIELDS,
    Features,
    Operation,
    mutation_payload,
    refusal,
)

A = TypeVar("A")

# The most outcomes one `settle` request carries: a server without reportJobs takes each as
# an aliased field, and refuses more aliases than QUEUELOG_MAX_ALIASES (15 by default).
SETTLE_BATCH = 15


# What a worker needs of each reported job: `report` selects only this.
BRIEF_FIELDS = "id status"


# A claim that answers at once, after the outcomes: its variables and its field.
_CLAIM_VARIABLES = "$limit: Int!, $types: [String!], $lease: Int"
_CLAIM_FIELD = (
    "claimJobs(limit: $limit, types: $types, leaseSeconds: $lease) "
    f"{{ jobs {{ {HELD_FIELDS} }} {ERRORS} }}"
)


@functools.lru_cache(maxsize=512)
def _settle_document(completed: int, failed: int, claim: bool = False, brief: bool = False) -> str:
    """The document for `completed` completeJob fields then `failed` failJob fields (each
    selecting the job's BRIEF_FIELDS with `brief`, else HELD_FIELDS), then with `claim` a
    claimJobs field that never waits: one text per shape, so the server compiles each shape
    once."""
    job = BRIEF_FIELDS if brief else HELD_FIELDS
    declared, fields = [], []
    for k in range(completed):
        declared.append(f"$i{k}: ID!, $r{k}: JSON")
        fields.append(f"a{k}: completeJob(id: $i{k}, result: $r{k}) {{ job {{ {job} }} {ERRORS} }}")
    for k in range(completed, completed + failed):
        declared.append(f"$i{k}: ID!, $e{k}: String!, $y{k}: Boolean")
        fields.append(
            f"a{k}: failJob(id: $i{k}, error: $e{k}, retryable: $y{k}) "
            f"{{ job {{ {job} }} willRetry {ERRORS} }}"
        )
    if claim:
        declared.append(_CLAIM_VARIABLES)
        fields.append(_CLAIM_FIELD)
    return f"mutation({', '.join(declared)}) {{ {' '.join(fields)} }}"


@dataclass(frozen=True, slots=True)
class _Outcomes:
    """Settlements as one document's fields: completes first, then fails (alias `a{k}` is
    settlement `order[k]`), with their variables."""

    order: list[int]
    completed: int
    variables: dict[str, Any]

    @classmethod
    def of(cls, settlements: Sequence[Settlement]) -> _Outcomes:
        order = sorted(range(len(settlements)), key=lambda i: not settlements[i].completed)
        variables: dict[str, Any] = {}
        for k, i in enumerate(order):
            s = settlements[i]
            variables[f"i{k}"] = str(s.job_id)
            if s.completed:
                variables[f"r{k}"] = s.result
            else:
                variables[f"e{k}"] = s.error
                variables[f"y{k}"] = s.retryable
        return cls(order, sum(s.completed for s in settlements), variables)

    def document(self, claim: bool = False, brief: bool = False) -> str:
        return _settle_document(self.completed, len(self.order) - self.completed, claim, brief)

    def answers(self, data: dict[str, Any], answer: Callable[[int, dict[str, Any]], A]) -> list[A]:
        """`answer(i, payload)` for each settlement `i` (alias `a{k}`), in order."""
        out: dict[int, A] = {i: answer(i, data[f"a{k}"]) for k, i in enumerate(self.order)}
        return [out[i] for i in range(len(self.order))]


@functools.lru_cache(maxsize=8)
def _report_document(claim: bool, brief: bool) -> str:
    """The reportJobs document (then, with `claim`, a claimJobs field that never waits)."""
    job = BRIEF_FIELDS if brief else HELD_FIELDS
    declared = "$outcomes: [JobOutcomeInput!]!" + (f", {_CLAIM_VARIABLES}" if claim else "")
    fields = [
        f"reportJobs(outcomes: $outcomes) {{ outcomes {{ job {{ {job} }} willRetry {ERRORS} }} }}"
    ]
    if claim:
        fields.append(_CLAIM_FIELD)
    return f"mutation({declared}) {{ {' '.join(fields)} }}"


@dataclass(frozen=True, slots=True)
class _Reports:
    """Settlements as one reportJobs field's outcomes, answered in the order given."""

    variables: dict[str, Any]

    @classmethod
    def of(cls, settlements: Sequence[Settlement]) -> _Reports:
        outcomes = [
            {"id": str(s.job_id), "result": s.result}
            if s.completed
            else {"id": str(s.job_id), "error": s.error, "retryable": s.retryable}
            for s in settlements
        ]
        return cls({"outcomes": outcomes})

    def document(self, claim: bool = False, brief: bool = False) -> str:
        return _report_document(claim, brief)

    def answers(self, data: dict[str, Any], answer: Callable[[int, dict[str, Any]], A]) -> list[A]:
        """`answer(i, payload)` for each settlement `i`, in order."""
        found = data["reportJobs"]["outcomes"]
        if len(found) != len(self.variables["outcomes"]):
            raise ValueError("reportJobs answered another number of outcomes")
        return [answer(i, out) for i, out in enumerate(found)]


def _batch(f: Features, settlements: Sequence[Settlement]) -> _Reports | _Outcomes:
    """The settlements as the server takes them: one reportJobs, or aliased fields."""
    return _Reports.of(settlements) if f.report_jobs else _Outcomes.of(settlements)


def settle(
    f: Features, settlements: Sequence[Settlement]
) -> Operation[list[Job | Failed | UserError]]:
    """Several outcomes in one request (standard GraphQL: aliased mutation fields, run one
    after the other). Each answer, in the order given, is the completed `Job`, the `Failed`
    answer, or the `UserError` that refused that one outcome."""
    outcomes = _batch(f, settlements)

    def one(i: int, out: dict[str, Any]) -> Job | Failed | UserError:
        refused = refusal(out)
        if refused is not None:
            return refused
        if settlements[i].completed:
            return Job.of(out["job"])
        return Failed(Job.of(out["job"]), bool(out["willRetry"]))

    return Operation(
        outcomes.document(), outcomes.variables, lambda data: outcomes.answers(data, one)
    )


def settle_and_claim(
    f: Features,
    settlements: Sequence[Settlement],
    limit: int,
    types: list[str] | None,
    lease_seconds: int | None,
) -> Operation[tuple[list[Job | Failed | UserError], list[Job]]]:
    """`settle`, then in the same request a claim of up to `limit` jobs that answers at once
    (the fields run in order, so the places the outcomes free are free for the claim)."""
    outcomes = settle(f, settlements)
    return _with_claim(f, outcomes, settlements, limit, types, lease_seconds, brief=False)


def report(f: Features, settlements: Sequence[Settlement]) -> Operation[list[Reported]]:
    """`settle` answered briefly: each outcome's `Reported` (the job's id and status)."""
    outcomes = _batch(f, settlements)

    def one(i: int, out: dict[str, Any]) -> Reported:
        job_id = str(settlements[i].job_id)
        job = out.get("job")
        status = None if job is None else JobStatus(job["status"])
        if errors := out.get("userErrors"):
            first = errors[0]
            refused = UserError(first["code"], first["message"], first.get("field"))
            return Reported(job_id, status, refused=refused)
        return Reported(job_id, status, will_retry=bool(out.get("willRetry")))

    return Operation(
        outcomes.document(brief=True),
        outcomes.variables,
        lambda data: outcomes.answers(data, one),
    )


def report_and_claim(
    f: Features,
    settlements: Sequence[Settlement],
    limit: int,
    types: list[str] | None,
    lease_seconds: int | None,
) -> Operation[tuple[list[Reported], list[Job]]]:
    """`report`, then a claim that answers at once, in one request (as `settle_and_claim`)."""
    outcomes = report(f, settlements)
    return _with_claim(f, outcomes, settlements, limit, types, lease_seconds, brief=True)


def _with_claim(
    f: Features,
    outcomes: Operation[list[A]],
    settlements: Sequence[Settlement],
    limit: int,
    types: list[str] | None,
    lease_seconds: int | None,
    *,
    brief: bool,
) -> Operation[tuple[list[A], list[Job]]]:
    document = _batch(f, settlements).document(claim=True, brief=brief)
    variables = {**outcomes.variables, "limit": limit, "types": types, "lease": lease_seconds}

    def parse(data: dict[str, Any]) -> tuple[list[A], list[Job]]:
        jobs = [Job.of(j) for j in mutation_payload(data, "claimJobs")["jobs"]]
        return outcomes.parse(data), jobs

    return Operation(document, variables, parse)
