"""Calling a root field's strawberry resolver for a prepared operation: what strawberry's
resolver wrapper does for a field whose only extension is its permission classes, without
the wrapper's layers (an extension chain of partials, an `await_maybe` per layer).

The steps and their order are strawberry's (`schema_converter.from_resolver` and
`PermissionExtension.resolve_async`): build the `Info`, convert the arguments, check each
permission with the converted arguments, then call the resolver. A field with any other
extension, or a schema with exception handlers, is called through strawberry's wrapper.
"""

from __future__ import annotations

import inspect
from typing import Any

import strawberry
from graphql import GraphQLField, GraphQLResolveInfo
from strawberry.exceptions import (
    PermissionReturnedAwaitableInSyncContextError,
    PermissionReturnedNonBooleanError,
)
from strawberry.extensions.field_extension import FieldExtension
from strawberry.permission import PermissionExtension
from strawberry.types.field import StrawberryField

from queuelog.schema.fastpath.coerce import Arguments
from queuelog.schema.fastpath.prepared import Resolve


def _through_strawberry(field: GraphQLField) -> Resolve:
    resolve = field.resolve
    assert resolve is not None

    def through_strawberry(info: GraphQLResolveInfo[Any], args: dict[str, Any]) -> Any:
        return resolve(None, info, **args)

    return through_strawberry


def root_resolver(schema: strawberry.Schema, field: GraphQLField) -> Resolve:
    """How a prepared operation resolves `field`, a field of a root type."""
    definition = field.extensions.get("strawberry-definition")
    converter = schema.schema_converter
    if (
        not isinstance(definition, StrawberryField)
        or definition.base_resolver is None
        or definition.is_subscription
        or converter._exception_handler_specs
        or len(definition.extensions) > 1
        or any(type(e) is not PermissionExtension for e in definition.extensions)
        or PermissionExtension.map_arguments is not FieldExtension.map_arguments
    ):
        return _through_strawberry(field)
    resolver = definition.base_resolver
    func = resolver.wrapped_func
    if not callable(func):
        return _through_strawberry(field)
    extension = definition.extensions[0] if definition.extensions else None
    permissions = extension.permissions if isinstance(extension, PermissionExtension) else []
    arguments = Arguments(definition.arguments, schema)
    info_class = schema.config.info_class
    info_name = resolver.info_parameter.name if resolver.info_parameter else None
    source_names = [p.name for p in (resolver.parent_parameter, resolver.root_parameter) if p]
    positional = (None,) if resolver.self_parameter else ()
    is_async = definition.is_async

    async def resolve(info: GraphQLResolveInfo[Any], args: dict[str, Any]) -> Any:
        strawberry_info = info_class(_raw_info=info, _field=definition)
        kwargs = arguments.convert(args, strawberry_info)
        for name in source_names:
            kwargs[name] = None
        if info_name is not None:
            kwargs[info_name] = strawberry_info
        # as strawberry does: an `info` parameter is passed to the resolver, not to the
        # permissions (one named otherwise reaches both)
        wants_info = "info" in kwargs
        kwargs.pop("info", None)
        for permission in permissions:
            allowed = permission.has_permission(None, strawberry_info, **kwargs)
            if inspect.isawaitable(allowed):
                if not is_async:
                    if inspect.iscoroutine(allowed):
                        allowed.close()
                    raise PermissionReturnedAwaitableInSyncContextError(permission)
                allowed = await allowed
            if not isinstance(allowed, bool):
                if inspect.iscoroutine(allowed):
                    allowed.close()
                raise PermissionReturnedNonBooleanError(permission, allowed)
            if not allowed:
                assert isinstance(extension, PermissionExtension)
                return extension._on_unauthorized(permission)
        if wants_info:
            kwargs["info"] = strawberry_info
        result = func(*positional, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result

    return resolve
