"""The part of the errors script that monkeypatches failures in: unexpected exceptions,
permissions, non-null fields coming back null, leaves and lists that do not coerce, root
fields that do not complete. Run in this order by `test_errors.errors_script`."""

from __future__ import annotations

from typing import Any

from graphql import GraphQLError

from queuelog.api.types import jobs as types
from queuelog.auth.permissions import Authenticated, MayManage
from queuelog.service.jobs import JobService
from tests.prepared.documents import (
    API_KEYS,
    CLAIM_MANY,
    CREATE_KEY,
    ENQUEUE,
    ENQUEUE_MANY,
    JOB,
    JOB_FIELDS,
    JOBS,
    REVOKE_KEY,
    STATS,
    VIEWER,
)
from tests.prepared.harness import JSON, Run
from tests.prepared.patches import Per, built_with, raises, returns, sync_raises


async def unexpected_exceptions(run: Run, running: str) -> None:
    """Unexpected exceptions: masked, located, logged."""
    post, patched = run.post, run.patched
    boom = RuntimeError("boom: the database password is hunter2")
    with patched(JobService, "get", raises(boom)):
        await post("unexpected error, nullable root", JOB, {"id": running}, key="admin")
        await post(
            "unexpected error, nullable root, as JSON",
            JOB,
            {"id": running},
            key="admin",
            accept=JSON,
        )
        await post(
            "unexpected error, aliased and typename",
            "query($id: ID!) { __typename j: job(id: $id) { id } t: __typename }",
            {"id": running},
            key="admin",
        )
    with patched(JobService, "enqueue", raises(boom)):
        await post(
            "unexpected error, mutation", ENQUEUE, {"input": {"type": "email"}}, key="producer"
        )
        await post(
            "unexpected error, second mutation root field",
            """mutation($i: EnqueueJobInput!) {
                 a: claimJob { job { id } }
                 b: enqueueJob(input: $i) { job { id } }
                 c: claimJob { job { id } } }""",
            {"i": {"type": "email"}},
            key="admin",
        )
    with patched(JobService, "page", raises(KeyError("page"))):
        await post("unexpected error, jobs", JOBS, None, key="admin")
    with patched(JobService, "counts", raises(ValueError("counts"))):
        await post("unexpected error, queueStats", STATS, None, key="admin")
    with patched(type(run.keys), "list", raises(OSError("disk"))):
        await post("unexpected error, apiKeys", API_KEYS, key="admin")
    with patched(
        JobService, "get", raises(GraphQLError("told", extensions={"code": "TEAPOT", "n": 1}))
    ):
        await post(
            "a GraphQLError raised by a resolver is not masked", JOB, {"id": running}, key="admin"
        )
    hint = GraphQLError("no such job. Did you mean job 2?", extensions={"code": "NOPE"})
    with patched(JobService, "get", raises(hint)):
        await post(
            "a suggestion in a resolver's error is hidden", JOB, {"id": running}, key="admin"
        )
    with (
        patched(types.Job, "of", built_with(types.Job, type=None)),
        patched(JobService, "enqueue", raises(boom)),
    ):
        await post(
            "a nullable error in one mutation field, then a failing one",
            """mutation {
                 a: claimJob { job { type } }
                 b: enqueueJob(input: {type: "email"}) { job { id } } }""",
            key="admin",
        )
    with patched(Authenticated, "has_permission", sync_raises(RuntimeError("permission"))):
        await post("unexpected error in a permission", VIEWER, key="admin")
        await post(
            "unexpected error in a permission, mutation",
            ENQUEUE,
            {"input": {"type": "email"}},
            key="producer",
        )
    with patched(MayManage, "has_permission", lambda self, source, info, **kw: False):
        await post("a permission says no", API_KEYS, key="admin")
        await post("a permission says no, mutation", REVOKE_KEY, {"name": "x"}, key="admin")
    with patched(MayManage, "has_permission", lambda self, source, info, **kw: "yes"):
        await post("a permission answers a string", API_KEYS, key="admin")
    with patched(Authenticated, "has_permission", returns(True)):
        await post("an awaitable permission, async resolver", JOB, {"id": running}, key="admin")
    with patched(Authenticated, "has_permission", returns(False)):
        await post("an awaitable permission says no", JOB, {"id": running}, key="admin")


async def nulls_below_the_root(run: Run, running: str) -> None:
    """A non-null field below the root comes back null."""
    post, patched = run.post, run.patched
    with patched(types.Job, "of", built_with(types.Job, type=None)):
        await post("null type, job query: job is null", JOB, {"id": running}, key="admin")
        await post(
            "null type, enqueueJob: payload.job is null",
            ENQUEUE,
            {"input": {"type": "email"}},
            key="producer",
        )
        await post(
            "null type, enqueueJobs: all of data is null",
            ENQUEUE_MANY,
            {"inputs": [{"type": "email"}, {"type": "pdf"}]},
            key="producer",
        )
        await post("null type, jobs: up through edges and node", JOBS, {"first": 2}, key="admin")
        await post("null type, claimJobs", CLAIM_MANY, {"limit": 1}, key="worker")
        await post(
            "null type, the field selected twice",
            "query($id: ID!) { job(id: $id) { type id type } }",
            {"id": running},
            key="admin",
        )
        await post(
            "null type, in a fragment spread twice",
            """query($id: ID!) { job(id: $id) { ...F id ...F } }
                      fragment F on Job { id type }""",
            {"id": running},
            key="admin",
        )
        await post(
            "null type, via fragments",
            "query($id: ID!) { job(id: $id) { ...A } } fragment A on Job { ... { type } }",
            {"id": running},
            key="admin",
        )
        await post(
            "null type, first mutation field nulls data, second does not run",
            """mutation($i: [EnqueueJobInput!]!) {
                 a: enqueueJobs(inputs: $i) { jobs { type } }
                 b: enqueueJob(input: {type: "email"}) { job { id } }
               }""",
            {"i": [{"type": "pdf"}]},
            key="producer",
        )
        await post(
            "null type, nullable job in a mutation then another field",
            """mutation($id: ID!) {
                 a: heartbeatJob(id: $id) { job { id type } userErrors { code } }
                 b: heartbeatJob(id: $id, leaseSeconds: 100) { job { id } }
               }""",
            {"id": running},
            key="worker",
        )
    await post("the next id shows what ran", ENQUEUE, {"input": {"type": "email"}}, key="producer")
    odd = Per(lambda j: None if int(j.id) % 2 else j.type)
    with patched(types.Job, "of", built_with(types.Job, type=odd, worker_id={"bad": 1})):
        await post(
            "nullable errors, then a non-null one in a list",
            "{ jobs(first: 4) { nodes { id workerId type } } }",
            key="admin",
        )
        await post(
            "nullable errors, then a non-null one, in a nullable parent",
            "query($id: ID!) { job(id: $id) { workerId id type } }",
            {"id": "1"},
            key="admin",
        )
        await post(
            "a non-null error first: the rest is not completed",
            "query($id: ID!) { job(id: $id) { type workerId } }",
            {"id": "1"},
            key="admin",
        )
        await post(
            "nullable errors only",
            "query($id: ID!) { job(id: $id) { id workerId w: workerId } }",
            {"id": "2"},
            key="admin",
        )


async def leaves_and_lists(run: Run, running: str) -> None:
    """Leaves that do not coerce, in nullable and non-null positions; lists likewise."""
    post, patched = run.post, run.patched
    leaves: list[tuple[str, dict[str, Any]]] = [
        ("an Int that is not one", {"retry_count": "x"}),
        ("an Int past 32 bits", {"max_retries": 2**40}),
        ("an enum value that is not one", {"status": "BOGUS"}),
        ("an enum given its value", {"priority": 10}),
        ("a String given a dict", {"error": {"x": 1}}),
        ("a String given an int", {"worker_id": 7}),
        ("an ID given an int", {"id": 7}),
        ("an ID given a float", {"id": 7.5}),
        ("a DateTime that is not one", {"created_at": "yesterday"}),
        ("a null JSON in a non-null position", {"payload": None}),
        ("an exception as a value", {"result": ValueError("as a value")}),
        ("an exception as a non-null value", {"producer": LookupError("as a value")}),
    ]
    for name, changes in leaves:
        with patched(types.Job, "of", built_with(types.Job, **changes)):
            await post(f"{name}, query", JOB, {"id": running}, key="admin")
            await post(
                f"{name}, list",
                "{ jobs(first: 2) { nodes { ...JobFields } } }" + JOB_FIELDS,
                key="admin",
            )
            await post(f"{name}, mutation", ENQUEUE, {"input": {"type": "pdf"}}, key="producer")

    lists: list[tuple[str, Any]] = [
        ("a null list item", ["email", None]),
        ("a list that is a number", 5),
        ("a list that is a string", "ab"),
        ("a list that is a dict", {"a": 1}),
        ("a list of the wrong items", [1, {"x": 2}]),
        ("a list with an exception", ["email", RuntimeError("item")]),
        ("a list that is a generator", Per(lambda k: (t for t in ("a", "b")))),
    ]
    for name, value in lists:
        with patched(types.ApiKey, "of", built_with(types.ApiKey, allowed_types=value)):
            await post(f"{name}, nullable list", API_KEYS, key="admin")
            await post(
                f"{name}, mutation",
                CREATE_KEY,
                {"input": {"name": f"k-{len(run.exchanges)}", "role": "WORKER"}},
                key="admin",
            )
    with patched(types.ApiKey, "of", classmethod(lambda cls, key: None)):
        await post("a null item in a non-null list at the root", API_KEYS, key="admin")
    with patched(types.UserError, "of", built_with(types.UserError, code=None)):
        await post(
            "a null in a non-null list in a payload",
            ENQUEUE,
            {"input": {"type": "sync"}},
            key="producer",
        )
    with patched(types.UserError, "of", built_with(types.UserError, field=[None])):
        await post(
            "a null item in a nullable list in a list",
            ENQUEUE,
            {"input": {"type": "sync"}},
            key="producer",
        )


async def root_fields(run: Run) -> None:
    """A root field coming back null or not coercing."""
    post, patched = run.post, run.patched
    from queuelog.api.resolvers import mutations, queries

    with patched(queries, "QueueStats", lambda **counts: None):
        await post("a null non-null root field", STATS, None, key="admin")
    with patched(mutations, "EnqueueJobPayload", lambda **kw: None):
        await post(
            "a null non-null mutation root field",
            ENQUEUE,
            {"input": {"type": "email"}},
            key="producer",
        )
    with patched(type(run.keys), "revoke", returns(None)):
        await post("a null Boolean! root", REVOKE_KEY, {"name": "x"}, key="admin")
    with patched(type(run.keys), "revoke", returns("yes")):
        await post("a Boolean! root given a string", REVOKE_KEY, {"name": "x"}, key="admin")
    with patched(queries, "QueueStats", lambda **counts: {"pending": 1}):
        await post("an object that is a dict", STATS, None, key="admin")
    with patched(
        JobService,
        "counts",
        returns({"pending": None, "running": "many", "completed": 1, "failed": 0, "cancelled": 0}),
    ):
        await post("non-null leaves of a non-null root", STATS, None, key="admin")
    await post("still answering", "{ viewer { name } }", key="admin")
