"""Assembles the Schema: the contract's root types over the resolvers, plus its extensions.

graphql-core's validation dominates a cheap request: `OperationGuard` caches parsing and
validation (in LRU caches at module level, shared by every request) as long as the validation
rules stay the same objects from one request to the next.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.extensions import SchemaExtension
from strawberry.extensions.runner import SchemaExtensionsRunner
from strawberry.types import ExecutionContext, ExecutionResult
from strawberry.types.execution import PreExecutionError
from strawberry.types.graphql import OperationType

from queuelog.auth.permissions import AdminOnly, Authenticated, ProducerOrAdmin, WorkerOrAdmin
from queuelog.config import Settings
from queuelog.graphql_types import (
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
    QueueStats,
    Viewer,
)
from queuelog.resolvers import mutations, queries, subscriptions
from queuelog.schema.extension import (
    LeanRunner,
    OperationGuard,
    hide_suggestion,
    mask,
    missing_operation_name,
    parse_document,
    validate_document,
)
from queuelog.schema.fastpath.executor import Executor, SharedEvents
from queuelog.schema.fastpath.invoke import root_resolver
from queuelog.schema.fastpath.prepared import Prepared, PreparedOperations
from queuelog.schema.limits import QueryLimits


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
        description="Newest first. `first` must be between 1 and 100.",
    )
    queue_stats: QueueStats = strawberry.field(
        resolver=queries.queue_stats,
        permission_classes=[Authenticated],
        description="Counts over the jobs the viewer may see.",
    )
    api_keys: list[ApiKey] = strawberry.field(
        resolver=queries.api_keys, permission_classes=[AdminOnly], description="Admin only."
    )


@strawberry.type
class Mutation:
    enqueue_job: EnqueueJobPayload = strawberry.mutation(
        resolver=mutations.enqueue_job, permission_classes=[ProducerOrAdmin]
    )
    enqueue_jobs: EnqueueJobsPayload = strawberry.mutation(
        resolver=mutations.enqueue_jobs, permission_classes=[ProducerOrAdmin]
    )
    claim_job: ClaimJobPayload = strawberry.mutation(
        resolver=mutations.claim_job, permission_classes=[WorkerOrAdmin]
    )
    claim_jobs: ClaimJobsPayload = strawberry.mutation(
        resolver=mutations.claim_jobs, permission_classes=[WorkerOrAdmin]
    )
    heartbeat_job: JobPayload = strawberry.mutation(
        resolver=mutations.heartbeat_job, permission_classes=[WorkerOrAdmin]
    )
    complete_job: JobPayload = strawberry.mutation(
        resolver=mutations.complete_job, permission_classes=[WorkerOrAdmin]
    )
    fail_job: FailJobPayload = strawberry.mutation(
        resolver=mutations.fail_job, permission_classes=[WorkerOrAdmin]
    )
    cancel_job: JobPayload = strawberry.mutation(
        resolver=mutations.cancel_job, permission_classes=[ProducerOrAdmin]
    )
    retry_job: JobPayload = strawberry.mutation(
        resolver=mutations.retry_job, permission_classes=[AdminOnly]
    )
    create_api_key: CreateApiKeyPayload = strawberry.mutation(
        resolver=mutations.create_api_key, permission_classes=[AdminOnly]
    )
    revoke_api_key: bool = strawberry.mutation(
        resolver=mutations.revoke_api_key, permission_classes=[AdminOnly]
    )


@strawberry.type
class Subscription:
    job_status_changed: AsyncGenerator[JobEvent, None] = strawberry.subscription(
        resolver=subscriptions.job_status_changed, permission_classes=[Authenticated]
    )


SINGLE_RESULT = frozenset({OperationType.QUERY, OperationType.MUTATION})


class QueuelogSchema(strawberry.Schema):
    """The schema, its limits, and the operations prepared for the short path."""

    def __init__(
        self, *, query: type, mutation: type, subscription: type, limits: QueryLimits
    ) -> None:
        super().__init__(
            query=query,
            mutation=mutation,
            subscription=subscription,
            extensions=[lambda: OperationGuard(limits)],
            execution_context_class=Executor,
        )
        self.limits = limits
        self.events = SharedEvents()  # subscription events' results (`Executor`)
        graphql_schema = self._schema
        self.prepared = PreparedOperations(
            graphql_schema,
            parse=lambda query: parse_document(query, limits.max_tokens),
            validate=lambda document: validate_document(graphql_schema, document, limits),
            resolver=lambda field: root_resolver(self, field),
        )

    async def execute(self, query: str | None, *args: Any, **kwargs: Any) -> ExecutionResult:
        refusal = missing_operation_name(
            query, _operation_name(args, kwargs, 3), self.limits.max_tokens
        )
        if refusal is not None:
            return ExecutionResult(data=None, errors=[refusal])
        # One result cannot carry a subscription's events: those are served by `stream`
        # (WebSocket) only, so any single-result path refuses them before they run.
        allowed = kwargs.get("allowed_operation_types") or tuple(OperationType)
        kwargs["allowed_operation_types"] = [t for t in allowed if t in SINGLE_RESULT]
        return await super().execute(query, *args, **kwargs)

    async def stream(self, query: str | None, *args: Any, **kwargs: Any) -> Any:
        """`subscribe` and both WebSocket protocols run every operation through here."""
        refusal = missing_operation_name(
            query, _operation_name(args, kwargs, 3), self.limits.max_tokens
        )
        if refusal is not None:
            return _refused(refusal)
        return await super().stream(query, *args, **kwargs)

    def create_extensions_runner(
        self, execution_context: ExecutionContext, extensions: list[SchemaExtension]
    ) -> SchemaExtensionsRunner:
        return LeanRunner(execution_context=execution_context, extensions=extensions)

    async def execute_prepared(
        self, prepared: Prepared, variables: dict[str, Any] | None, context: Any
    ) -> ExecutionResult | None:
        """What `execute` answers for a prepared operation, without strawberry's pipeline:
        errors logged as `process_errors` logs them, then masked and stripped of
        suggestions as `OperationGuard` does. None when the variables do not coerce."""
        outcome = await prepared.execute(context, variables)
        if outcome is None:
            return None
        errors = outcome.errors
        if errors:
            self.process_errors(errors)
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
    limits = QueryLimits.from_settings(settings or Settings())
    return QueuelogSchema(query=Query, mutation=Mutation, subscription=Subscription, limits=limits)
