"""Assembles the Schema: the contract's root types over the resolvers, the resolvers of
fields below the root, its extensions, and the fast path when it is on.

graphql-core's validation dominates a cheap request: `OperationGuard` caches parsing and
validation (in LRU caches at module level, shared by every request) as long as the validation
rules stay the same objects from one request to the next.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import strawberry
from graphql import GraphQLError
from strawberry.types import ExecutionContext, ExecutionResult, get_object_definition
from strawberry.types.execution import PreExecutionError
from strawberry.types.graphql import OperationType

from queuelog.api import fastpath
from queuelog.api.errors import log_errors, mask
from queuelog.api.extension import (
    OperationGuard,
    hide_suggestion,
    operation_name_refusal,
    parse_document,
    validate_document,
)
from queuelog.api.limits import QueryLimits
from queuelog.api.resolvers import (
    fields,
    job_types,
    mutations,
    queries,
    schedules,
    subscriptions,
)
from queuelog.api.types.jobs import (
    ApiKey,
    ClaimJobPayload,
    ClaimJobsPayload,
    CreateApiKeyPayload,
    EnqueueJobPayload,
    EnqueueJobsPayload,
    FailJobPayload,
    Job,
    JobConnection,
    JobEvent,
    JobPayload,
    JobProgress,
    QueueStats,
    ReportJobsPayload,
    Viewer,
)
from queuelog.api.types.queues import (
    BulkJobsPayload,
    JobType,
    JobTypePayload,
    Schedule,
    SchedulePayload,
    ThroughputBucket,
)
from queuelog.auth.permissions import (
    Authenticated,
    MayEnqueue,
    MayManage,
    MayReadAll,
    MayWork,
)
from queuelog.config import Settings
from queuelog.domain.codes import ErrorCode
from queuelog.fences.graphql_core import graphql_schema
from queuelog.storage import deadline

if TYPE_CHECKING:
    from queuelog.api.fastpath.prepared import Commuting


def _resolve(type_: type, name: str, resolver: Callable[..., Any]) -> None:
    """Give the field `name` of `type_` its resolver (strawberry's field decorator)."""
    get_object_definition(type_, strict=True).get_field(name)(resolver)  # type: ignore[misc]


_resolve(Job, "events", fields.job_events)
_resolve(JobEvent, "job", fields.event_job)
_resolve(Schedule, "last_job", schedules.last_job)


@strawberry.type
class Query:
    viewer: Viewer = strawberry.field(
        resolver=queries.viewer,
        permission_classes=[Authenticated],
        description="The caller's identity. Errors with UNAUTHENTICATED when there is none.",
    )
    job: Job | None = strawberry.field(
        resolver=queries.job,
        permission_classes=[Authenticated],
        description="Null when the job does not exist or the viewer may not see it.",
    )
    jobs: JobConnection = strawberry.field(
        resolver=queries.jobs,
        permission_classes=[Authenticated],
        description=(
            "Newest first. `first` must be between 1 and 100."
            " `filter` combines with `status` and `type`."
        ),
    )
    queue_stats: QueueStats = strawberry.field(
        resolver=queries.queue_stats,
        permission_classes=[Authenticated],
        description="Counts over the jobs the viewer may see.",
    )
    job_types: list[JobType] = strawberry.field(
        resolver=job_types.job_types,
        permission_classes=[Authenticated],
        description="Every configured job type the viewer may use or see, by name.",
    )
    api_keys: list[ApiKey] = strawberry.field(
        resolver=queries.api_keys, permission_classes=[MayManage], description="Admin only."
    )
    schedules: list[Schedule] = strawberry.field(
        resolver=schedules.schedules,
        permission_classes=[MayReadAll],
        description="Admin and viewer.",
    )
    throughput: list[ThroughputBucket] = strawberry.field(
        resolver=queries.throughput,
        permission_classes=[Authenticated],
        description=(
            "Buckets from `since` (inclusive) to `until` (default now), oldest first;"
            " bucketSeconds from 1 to 86400, at most 1,440 buckets."
        ),
    )


def _job_named(args: dict[str, Any]) -> int | None:
    return queries.parse_id(str(args["id"]))


# Mutation fields that change only the one job their `id` argument names, and read nothing
# before their one write: consecutive ones on different jobs may run together (see
# `fastpath.prepared`), so a worker's batch of outcomes shares one transaction.
COMMUTING_MUTATIONS = {name: _job_named for name in ("heartbeatJob", "completeJob", "failJob")}


@strawberry.type
class Mutation:
    enqueue_job: EnqueueJobPayload = strawberry.mutation(
        resolver=mutations.enqueue_job, permission_classes=[MayEnqueue]
    )
    enqueue_jobs: EnqueueJobsPayload = strawberry.mutation(
        resolver=mutations.enqueue_jobs, permission_classes=[MayEnqueue]
    )
    claim_job: ClaimJobPayload = strawberry.mutation(
        resolver=mutations.claim_job, permission_classes=[MayWork]
    )
    claim_jobs: ClaimJobsPayload = strawberry.mutation(
        resolver=mutations.claim_jobs, permission_classes=[MayWork]
    )
    heartbeat_job: JobPayload = strawberry.mutation(
        resolver=mutations.heartbeat_job, permission_classes=[MayWork]
    )
    complete_job: JobPayload = strawberry.mutation(
        resolver=mutations.complete_job, permission_classes=[MayWork]
    )
    fail_job: FailJobPayload = strawberry.mutation(
        resolver=mutations.fail_job, permission_classes=[MayWork]
    )
    report_jobs: ReportJobsPayload = strawberry.mutation(
        resolver=mutations.report_jobs,
        permission_classes=[MayWork],
        description=(
            "The holding worker only: 1 to 100 outcomes of jobs it holds, committed in one"
            " transaction.\nEach is judged on its own, as completeJob or failJob would judge it"
            " (repeats included):\na refused outcome changes nothing and does not stop the"
            " others."
        ),
    )
    cancel_job: JobPayload = strawberry.mutation(
        resolver=mutations.cancel_job, permission_classes=[MayEnqueue]
    )
    retry_job: JobPayload = strawberry.mutation(
        resolver=mutations.retry_job, permission_classes=[MayManage]
    )
    cancel_jobs: BulkJobsPayload = strawberry.mutation(
        resolver=mutations.cancel_jobs,
        permission_classes=[MayEnqueue],
        description=(
            "As cancelJob, for up to `limit` (1 to 10,000) PENDING or RUNNING jobs matching"
            " the filter that the caller may cancel."
        ),
    )
    retry_jobs: BulkJobsPayload = strawberry.mutation(
        resolver=mutations.retry_jobs,
        permission_classes=[MayManage],
        description=(
            "Admin only. As retryJob, for up to `limit` (1 to 10,000) FAILED or CANCELLED"
            " jobs matching the filter."
        ),
    )
    create_api_key: CreateApiKeyPayload = strawberry.mutation(
        resolver=mutations.create_api_key, permission_classes=[MayManage]
    )
    revoke_api_key: bool = strawberry.mutation(
        resolver=mutations.revoke_api_key, permission_classes=[MayManage]
    )
    pause_job_type: JobTypePayload = strawberry.mutation(
        resolver=job_types.pause_job_type,
        permission_classes=[MayManage],
        description="Admin only. Claims skip the type on every replica until resumeJobType.",
    )
    resume_job_type: JobTypePayload = strawberry.mutation(
        resolver=job_types.resume_job_type,
        permission_classes=[MayManage],
        description="Admin only.",
    )
    set_job_type_limits: JobTypePayload = strawberry.mutation(
        resolver=job_types.set_job_type_limits,
        permission_classes=[MayManage],
        description="Admin only. Replaces the type's limits; every field left null removes "
        "that limit.",
    )
    upsert_schedule: SchedulePayload = strawberry.mutation(
        resolver=schedules.upsert_schedule,
        permission_classes=[MayManage],
        description="Admin only. Creates or replaces a schedule.",
    )
    delete_schedule: bool = strawberry.mutation(
        resolver=schedules.delete_schedule,
        permission_classes=[MayManage],
        description="Admin only. False when no schedule has that name.",
    )
    run_schedule_now: EnqueueJobPayload = strawberry.mutation(
        resolver=schedules.run_schedule_now,
        permission_classes=[MayManage],
        description="Admin only. Enqueues the schedule's job now, in addition to its due times.",
    )


@strawberry.type
class Subscription:
    job_progress: AsyncGenerator[JobProgress, None] = strawberry.subscription(
        resolver=subscriptions.job_progress,
        permission_classes=[Authenticated],
        description="The job's progress each time its worker reports a new one (at most 10 a "
        "second; the latest wins), for as long as the job runs; completes when the job ends. "
        "Not replayed: the first message is the current progress, if any.",
    )
    job_status_changed: AsyncGenerator[JobEvent, None] = strawberry.subscription(
        resolver=subscriptions.job_status_changed, permission_classes=[Authenticated]
    )


SINGLE_RESULT = frozenset({OperationType.QUERY, OperationType.MUTATION})


class QueuelogSchema(strawberry.Schema):
    """The schema, its limits, and the fast path (None when it is off)."""

    def __init__(
        self,
        *,
        query: type,
        mutation: type,
        subscription: type,
        limits: QueryLimits,
        prepared_operations: bool = True,
        execution_timeout: float | None = None,
        commuting: Commuting | None = None,
    ) -> None:
        fast_path = fastpath.load(prepared_operations)
        super().__init__(
            query=query,
            mutation=mutation,
            subscription=subscription,
            extensions=[lambda: OperationGuard(limits)],
            execution_context_class=None if fast_path is None else fast_path.executor_class,
        )
        self.limits = limits
        self.execution_timeout = execution_timeout
        self.fast_path = fast_path
        schema = graphql_schema(self)
        self.prepared = (
            None
            if fast_path is None
            else fast_path.prepared_operations(
                schema,
                parse=lambda query: parse_document(query, limits.max_tokens),
                validate=lambda document: validate_document(schema, document, limits),
                commuting=commuting,
            )
        )

    async def execute(self, query: str | None, *args: Any, **kwargs: Any) -> ExecutionResult:
        refusal = operation_name_refusal(
            query, _operation_name(args, kwargs, 3), self.limits.max_tokens
        )
        if refusal is not None:
            return ExecutionResult(data=None, errors=[refusal])
        # One result cannot carry a subscription's events: those are served by `stream`
        # (WebSocket) only, so any single-result path refuses them before they run.
        allowed = kwargs.get("allowed_operation_types") or tuple(OperationType)
        kwargs["allowed_operation_types"] = [t for t in allowed if t in SINGLE_RESULT]
        result = await self._within_deadline(super().execute(query, *args, **kwargs))
        assert result is not None
        return result

    async def _within_deadline(
        self, execution: Awaitable[ExecutionResult | None]
    ) -> ExecutionResult | None:
        """`execution`, or EXECUTION_TIMEOUT once it has run longer than the timeout. Its
        reads keep to the same deadline (`storage.deadline`): one still running then is
        stopped."""
        try:
            with deadline.within(self.execution_timeout):
                async with asyncio.timeout(self.execution_timeout):
                    result = await execution
        except TimeoutError:
            result = None
            stopped = True
        else:
            stopped = result is not None and any(
                isinstance(e.original_error, deadline.DeadlinePassed) for e in result.errors or ()
            )
        if stopped:
            message = (
                f"execution took longer than {self.execution_timeout:g} s "
                "(QUEUELOG_EXECUTION_TIMEOUT_SECONDS)"
            )
            error = GraphQLError(message, extensions={"code": ErrorCode.EXECUTION_TIMEOUT})
            return ExecutionResult(data=None, errors=[error])
        return result

    async def stream(self, query: str | None, *args: Any, **kwargs: Any) -> Any:
        """`subscribe` and both WebSocket protocols run every operation through here."""
        refusal = operation_name_refusal(
            query, _operation_name(args, kwargs, 3), self.limits.max_tokens
        )
        if refusal is not None:
            return _refused(refusal)
        return await super().stream(query, *args, **kwargs)

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        log_errors(errors, None if execution_context is None else execution_context.context)

    async def execute_prepared(
        self, prepared: Any, variables: dict[str, Any] | None, context: Any
    ) -> ExecutionResult | None:
        """What `execute` answers for a prepared operation, without strawberry's pipeline:
        errors logged as `process_errors` logs them (with the request's id), then masked and
        stripped of suggestions as `OperationGuard` does. None when the variables do not
        coerce."""
        return await self._within_deadline(self._execute_prepared(prepared, variables, context))

    async def _execute_prepared(
        self, prepared: Any, variables: dict[str, Any] | None, context: Any
    ) -> ExecutionResult | None:
        outcome = await prepared.execute(context, variables)
        if outcome is None:
            return None
        errors = outcome.errors
        if errors:
            log_errors(errors, context)
            errors = mask(errors, context)
            for error in errors:
                hide_suggestion(error, self.limits)
        return ExecutionResult(data=outcome.data, errors=errors or None, extensions={})


def _operation_name(args: tuple[Any, ...], kwargs: dict[str, Any], position: int) -> Any:
    """The operation name given to `execute` or `stream`, by keyword or by position."""
    if "operation_name" in kwargs:
        return kwargs["operation_name"]
    return args[position] if len(args) > position else None


async def _refused(error: GraphQLError) -> AsyncGenerator[PreExecutionError, None]:
    yield PreExecutionError(data=None, errors=[error])


def build_schema(settings: Settings | None = None) -> QueuelogSchema:
    settings = settings or Settings()
    return QueuelogSchema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        limits=QueryLimits.from_settings(settings),
        prepared_operations=settings.prepared_operations,
        execution_timeout=settings.execution_timeout_seconds,
        commuting=COMMUTING_MUTATIONS,
    )
