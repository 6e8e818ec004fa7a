"""Errors answer alike: refusals, variables that do not coerce, documents that do not
parse or validate, and (from `failures`) failures monkeypatched in."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.prepared import failures
from tests.prepared.documents import (
    API_KEYS,
    CLAIM,
    CLAIM_MANY,
    COMPLETE,
    ENQUEUE,
    FAIL,
    HEARTBEAT,
    JOB,
    VIEWER,
    seed,
)
from tests.prepared.harness import FALLBACK, GENERIC, JSON, Run, differential


async def errors_script(run: Run) -> None:
    running = (await seed(run))[0]
    await refusals(run, running)
    await variables_that_do_not_coerce(run, running)
    await documents_that_do_not_validate(run)
    await failures.unexpected_exceptions(run, running)
    await failures.nulls_below_the_root(run, running)
    await failures.leaves_and_lists(run, running)
    await failures.root_fields(run)


async def refusals(run: Run, running: str) -> None:
    """Who may: UNAUTHENTICATED, FORBIDDEN."""
    post = run.post
    await post("viewer, no key", VIEWER)
    await post("viewer, no key, as JSON", VIEWER, accept=JSON)
    await post("job, no key", JOB, {"id": running})
    await post("enqueue, no key", ENQUEUE, {"input": {"type": "email"}})
    await post("claim, no key", CLAIM, {"types": ["email"]})
    await post("enqueue as a worker", ENQUEUE, {"input": {"type": "email"}}, key="worker")
    await post("claim as a producer", CLAIM, None, key="producer")
    await post("heartbeat as a producer", HEARTBEAT, {"id": running}, key="producer")
    await post("complete as a producer", COMPLETE, {"id": running}, key="producer")
    await post("apiKeys as a worker", API_KEYS, key="worker")
    await post("apiKeys, no key, nested __typename", "{ __typename apiKeys { __typename name } }")


async def variables_that_do_not_coerce(run: Run, running: str) -> None:
    """Variables that do not coerce: the generic path reports them."""
    post = run.post
    await post("missing required variable", ENQUEUE, {}, key="producer", expect=FALLBACK)
    await post("no variables at all", ENQUEUE, None, key="producer", expect=FALLBACK)
    await post(
        "wrong type",
        ENQUEUE,
        {"input": {"type": "email", "maxRetries": "x"}},
        key="producer",
        expect=FALLBACK,
    )
    await post(
        "unknown input field",
        ENQUEUE,
        {"input": {"type": "email", "bogus": 1}},
        key="producer",
        expect=FALLBACK,
    )
    await post(
        "enum value wrong",
        ENQUEUE,
        {"input": {"type": "email", "priority": "HIGHH"}},
        key="producer",
        expect=FALLBACK,
    )
    await post(
        "enum value wrong, as JSON",
        ENQUEUE,
        {"input": {"type": "email", "priority": "low"}},
        key="producer",
        expect=FALLBACK,
        accept=JSON,
    )
    await post(
        "null for a non-null variable", ENQUEUE, {"input": None}, key="producer", expect=FALLBACK
    )
    await post(
        "null for a non-null input field",
        ENQUEUE,
        {"input": {"type": None}},
        key="producer",
        expect=FALLBACK,
    )
    await post("Int past 32 bits", CLAIM_MANY, {"limit": 2**40}, key="worker", expect=FALLBACK)
    await post("a list for an ID", JOB, {"id": ["1"]}, key="admin", expect=FALLBACK)
    await post("a float for an ID", JOB, {"id": 1.5}, key="admin", expect=FALLBACK)
    await post(
        "several bad variables",
        FAIL,
        {"id": None, "error": 5, "retryable": "no"},
        key="worker",
        expect=FALLBACK,
    )
    await post("bad variables, no key", ENQUEUE, {"input": {}}, expect=FALLBACK)
    await post(
        "null for a nullable variable with a default, in a non-null position",
        """mutation($t: String = "email", $n: Int = 1) {
             enqueueJob(input: {type: $t}) { job { id } }
             claimJobs(limit: $n) { jobs { id } } }""",
        {"t": None},
        key="admin",
    )
    await post(
        "null for a nullable variable with a default, in a non-null argument",
        """mutation($n: Int = 1) { claimJobs(limit: $n) { jobs { id } } }""",
        {"n": None},
        key="worker",
    )
    await post(
        "a number for a DateTime",
        ENQUEUE,
        {"input": {"type": "email", "runAt": 5}},
        key="producer",
        expect=FALLBACK,
    )
    await post(
        "a DateTime that is not one",
        ENQUEUE,
        {"input": {"type": "email", "runAt": "tomorrow"}},
        key="producer",
        expect=FALLBACK,
    )
    await post("variables null", VIEWER, body={"query": VIEWER, "variables": None}, key="admin")
    await post("an integer for an ID coerces", JOB, {"id": int(running)}, key="admin")
    await post("a string for a list coerces", CLAIM, {"types": "sync"}, key="worker2")
    await post(
        "variables not an object",
        VIEWER,
        body={"query": VIEWER, "variables": [1]},
        key="admin",
        expect=GENERIC,
        document=False,
    )
    await post(
        "operationName not a string",
        VIEWER,
        body={"query": VIEWER, "operationName": 5},
        key="admin",
        expect=GENERIC,
        document=False,
    )


async def documents_that_do_not_validate(run: Run) -> None:
    """Documents that do not parse or validate (never prepared)."""
    post = run.post
    await post("literal of the wrong type", "{ job(id: true) { id } }", key="admin", expect=GENERIC)
    await post(
        "literal enum value wrong",
        "{ jobs(status: DONE) { totalCount } }",
        key="admin",
        expect=GENERIC,
    )
    await post("unknown field", "{ viewer { nme } }", key="admin", expect=GENERIC)
    await post(
        "unknown field, as JSON", "{ viewer { nme } }", key="admin", expect=GENERIC, accept=JSON
    )
    await post("syntax error", "{ viewer { name }", key="admin", expect=GENERIC)
    await post("too many tokens", "{ " + "__typename " * 2500 + "}", key="admin", expect=GENERIC)
    await post(
        "too deep",
        "{ job(id: 1) { " + "events { job { " * 6 + "id" + " } }" * 6 + " } }",
        key="admin",
        expect=GENERIC,
    )
    await post(
        "too many aliases",
        "{ " + " ".join(f"a{i}: __typename" for i in range(20)) + " }",
        key="admin",
        expect=GENERIC,
    )


async def test_errors_answer_alike(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped, _ = await differential(errors_script, backend, tmp_path, monkeypatch)
    bodies = {e.name: e.body for e in shipped.exchanges}
    name = "unexpected error, nullable root"
    request_id = f"req-{[e.name for e in shipped.exchanges].index(name)}"
    assert bodies[name] == {
        "data": {"job": None},
        "errors": [
            {
                "message": "Internal server error",
                "locations": [{"line": 1, "column": 23}],
                "path": ["job"],
                "extensions": {"code": "INTERNAL_SERVER_ERROR", "requestId": request_id},
            }
        ],
    }
    assert bodies["null type, enqueueJobs: all of data is null"]["data"] is None
    assert bodies["null type, job query: job is null"]["data"] == {"job": None}
