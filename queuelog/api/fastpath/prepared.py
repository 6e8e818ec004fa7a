"""Prepared operations: a short way through execution for the documents clients send again
and again (a worker's claimJob, a producer's enqueueJob, a frontend's job poll).

graphql-core executes every field generically: it collects the selection set again, builds
a resolve info, calls a resolver wrapper and completes the value by looking at its type,
field by field and request by request. For the plain fields of a `Job`, and the many jobs
of an `enqueueJobs`, that is most of a request's cost (docs/performance.md).

So an operation that parsed and validated clean, whose only resolvers are its root fields,
is compiled once per (document, operation name): below the root, each selection set becomes
a list of (response key, attribute, completer) that reads the objects the resolvers returned
and coerces leaves with the schema's own scalars and enums. What holds a rule runs as on the
generic path: variables coerce as graphql-core coerces them (variables that do not coerce
send the request the generic way, which reports them), arguments through graphql-core, and
each root field through strawberry's own resolver for it, which converts the arguments and
checks the field's permission classes.
Errors are located, propagate null to the nearest nullable parent and are logged and
masked as graphql-core and `OperationGuard` would; `tests/prepared/` holds the two
paths to the same answers.

Mutation fields run one after the other, as GraphQL says, except a run of consecutive
fields the schema names as commuting (`commuting`: each changes only the one job its `id`
argument names, and reads nothing before its one write) whose ids all differ: those run
together, so their writes share one transaction (a worker's batch of outcomes). Their
answers are those of running them in order, since no field of the run can see another's
effect. One difference is known: when one of them raises an error that nulls the whole
`data`, the others of its run have taken effect too, where in order those after it would
not have run; each of them is safe to repeat, and a client sends the request again.

Not prepared, so executed the generic way: subscriptions, introspection, directives
(@skip, @include), fields below the root that have a resolver or arguments (`Job.events`),
abstract types, and queries with more than one resolved root field (graphql-core runs
those concurrently, and the order of their errors is its own).

One difference is known and left: below the root, completion is synchronous, so a plain
field holding an awaitable would be coerced as it is where graphql-core awaits it. None of
queuelog's types holds one (they are dataclasses of values); a type that did would need a
resolver, which sends its operations the generic way. `tests/prepared/test_differences.py`
keeps this as a strict xfail.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from graphql import (
    DocumentNode,
    FieldNode,
    GraphQLError,
    GraphQLField,
    GraphQLNonNull,
    GraphQLResolveInfo,
    GraphQLSchema,
    OperationDefinitionNode,
    OperationType,
)
from graphql.execution import get_argument_values
from graphql.pyutils import Path
from graphql.type import GraphQLResolveInfoHelpers

from queuelog.api.fastpath.coerce import Variables
from queuelog.api.fastpath.complete import (
    Compiler,
    Complete,
    NotPreparable,
    NullPropagates,
    handled,
    typename,
)

# Mutation fields that commute, each with what names the one job it changes, from its
# arguments (None: none it can name); see the module's docstring.
Commuting = Mapping[str, Callable[[dict[str, Any]], Hashable | None]]

# How a root field is resolved: strawberry's resolver for the field, which converts the
# arguments and checks the permission classes; (source, info, **arguments) -> value.
Resolve = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class _Root:
    key: str
    field: GraphQLField | None  # None: __typename
    nodes: list[FieldNode]
    complete: Complete
    non_null: bool
    resolve: Resolve | None

    @property
    def name(self) -> str:
        """The field's name, as the schema has it (`__typename` too)."""
        return self.nodes[0].name.value


def _is_awaitable(value: Any) -> TypeGuard[Awaitable[Any]]:
    return inspect.isawaitable(value)


class _Tracked:
    """GraphQLResolveInfoHelpers for a prepared execution: work a resolver hands to
    `track` is awaited before the response is written."""

    def __init__(self) -> None:
        self.pending: list[Awaitable[Any]] = []
        self.helpers = GraphQLResolveInfoHelpers(self.gather, self.track)

    async def gather(self, values: Sequence[Awaitable[Any]]) -> list[Any]:
        return list(await asyncio.gather(*values))

    def track(self, values: Sequence[Any]) -> None:
        self.pending.extend(v for v in values if inspect.isawaitable(v))


@dataclass(frozen=True, slots=True)
class Outcome:
    data: dict[str, Any] | None
    errors: list[GraphQLError]


class Prepared:
    """One compiled operation of one document."""

    def __init__(
        self,
        schema: GraphQLSchema,
        document: DocumentNode,
        operation: OperationDefinitionNode,
        commuting: Commuting | None = None,
    ) -> None:
        root_type = schema.get_root_type(operation.operation)
        if root_type is None or operation.operation is OperationType.SUBSCRIPTION:
            raise NotPreparable
        compiler = Compiler(schema, document)
        roots = []
        for key, nodes in compiler.collect(root_type, [operation.selection_set]).items():
            name = nodes[0].name.value
            if name == "__typename":
                roots.append(_Root(key, None, nodes, typename, True, None))
                continue
            if name.startswith("__"):
                raise NotPreparable  # introspection
            field = root_type.fields[name]
            complete = compiler.value(field.type, nodes, root_type.name, name)
            non_null = isinstance(field.type, GraphQLNonNull)
            roots.append(_Root(key, field, nodes, complete, non_null, field.resolve))
        resolved = [r for r in roots if r.field is not None]
        if operation.operation is OperationType.QUERY and len(resolved) > 1:
            raise NotPreparable
        self.schema = schema
        self.variables = Variables(schema, operation.variable_definitions or ())
        self.root_type = root_type
        self.operation = operation
        self.fragments = compiler.fragments
        self.roots = roots
        mutation = operation.operation is OperationType.MUTATION
        self.commuting: Commuting = (commuting or {}) if mutation else {}
        self.runs = _commuting_groups(roots, self.commuting)

    async def execute(self, context: Any, variables: dict[str, Any] | None) -> Outcome | None:
        """The operation's data and field errors (not yet logged or masked), or None when
        the variables do not coerce: nothing has run then, and the generic path reports
        them."""
        coerced = self.variables.coerce(variables or {})
        if isinstance(coerced, list):
            return None
        tracked = _Tracked()
        data: dict[str, Any] = {}
        errors: list[GraphQLError] = []
        typename = self.root_type.name
        try:
            for run in self.runs:
                args = _independent_arguments(run, self.commuting, coerced)
                if args is not None:
                    await self._resolve_together(run, args, context, coerced, tracked, data, errors)
                    continue
                for root in run:
                    if root.field is None:
                        data[root.key] = typename
                        continue
                    path = Path(None, root.key, typename)
                    try:
                        data[root.key] = await self._resolve(
                            root, path, context, coerced, tracked, errors
                        )
                    except Exception as raw:
                        errors.append(handled(raw, root.nodes, path, root.non_null))
                        data[root.key] = None
        except NullPropagates as null:  # a non-null root field: the whole data is null
            errors.append(null.error)
            return Outcome(None, errors)
        finally:
            if tracked.pending:
                await asyncio.gather(*tracked.pending, return_exceptions=True)
        return Outcome(data, errors)

    async def _resolve_together(
        self,
        run: tuple[_Root, ...],
        args: list[dict[str, Any]],
        context: Any,
        variables: Any,
        tracked: _Tracked,
        data: dict[str, Any],
        errors: list[GraphQLError],
    ) -> None:
        """A commuting run's fields at once; their answers and errors in document order."""
        typename = self.root_type.name
        paths = [Path(None, root.key, typename) for root in run]

        async def resolve(i: int) -> Any:
            try:
                return await self._resolve(
                    run[i], paths[i], context, variables, tracked, errors, args[i]
                )
            except Exception as raw:
                return _Raised(raw)

        # Any order of their writes gives the same answers: they change different jobs.
        results = await asyncio.gather(*(resolve(i) for i in range(len(run))))
        for root, path, result in zip(run, paths, results, strict=True):
            if isinstance(result, _Raised):
                errors.append(handled(result.error, root.nodes, path, root.non_null))
                data[root.key] = None
            else:
                data[root.key] = result

    async def _resolve(
        self,
        root: _Root,
        path: Path,
        context: Any,
        variables: Any,
        tracked: _Tracked,
        errors: list[GraphQLError],
        args: dict[str, Any] | None = None,
    ) -> Any:
        field = root.field
        assert field is not None and root.resolve is not None
        node = root.nodes[0]
        info = GraphQLResolveInfo(
            node.name.value,
            root.nodes,
            field.type,
            self.root_type,
            path,
            self.schema,
            self.fragments,
            None,
            self.operation,
            variables,
            context,
            _is_awaitable,
            None,
            tracked.helpers,
        )
        if args is None:
            args = _arguments(root, variables)
        result = root.resolve(None, info, **args)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, Exception):
            raise result
        return root.complete(result, path, errors)


@dataclass(frozen=True, slots=True)
class _Raised:
    error: Exception


def _arguments(root: _Root, variables: Any) -> dict[str, Any]:
    field, node = root.field, root.nodes[0]
    assert field is not None
    return get_argument_values(field, node, variables) if field.args or node.arguments else {}


def _commuting_groups(roots: list[_Root], commuting: Commuting) -> list[tuple[_Root, ...]]:
    """The roots in document order, consecutive commuting fields grouped: each group is a
    candidate to run together, every other root a group of its own."""
    runs: list[tuple[_Root, ...]] = []
    for root in roots:
        if runs and root.name in commuting and runs[-1][-1].name in commuting:
            runs[-1] = (*runs[-1], root)
        else:
            runs.append((root,))
    return runs


def _independent_arguments(
    run: tuple[_Root, ...], commuting: Commuting, variables: Any
) -> list[dict[str, Any]] | None:
    """The arguments of a commuting run's fields when they change different jobs (then they
    may run together); None for a single field, a job named twice, or arguments that do not
    name a job or do not coerce (the fields then run in order, and report that as they
    would)."""
    if len(run) < 2:
        return None
    try:
        args = [_arguments(root, variables) for root in run]
    except Exception:
        return None
    changed = [commuting[root.name](a) for root, a in zip(run, args, strict=True)]
    if None in changed or len(set(changed)) < len(changed):
        return None
    return args


class PreparedOperations:
    """Prepared operations by (document text, operation name), at most `size` of them; a
    document that cannot be prepared is remembered as such."""

    def __init__(
        self,
        schema: GraphQLSchema,
        parse: Callable[[str], DocumentNode],
        validate: Callable[[DocumentNode], list[GraphQLError]],
        size: int = 1024,
        commuting: Commuting | None = None,
    ) -> None:
        self.schema = schema
        self.commuting = commuting
        self.parse = parse
        self.validate = validate
        self.size = size
        self.cache: dict[tuple[str, str | None], Prepared | None] = {}

    def get(self, query: str, operation_name: str | None) -> Prepared | None:
        key = (query, operation_name)
        try:
            return self.cache[key]
        except KeyError:
            pass
        prepared = self._prepare(query, operation_name)
        if len(self.cache) >= self.size:
            del self.cache[next(iter(self.cache))]
        self.cache[key] = prepared
        return prepared

    def _prepare(self, query: str, operation_name: str | None) -> Prepared | None:
        try:
            document = self.parse(query)
        except (GraphQLError, RecursionError):
            return None
        if self.validate(document):
            return None
        operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
        if operation_name is not None:
            operations = [o for o in operations if o.name and o.name.value == operation_name]
        if len(operations) != 1:
            return None
        try:
            return Prepared(self.schema, document, operations[0], self.commuting)
        except NotPreparable:
            return None
