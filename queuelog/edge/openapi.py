"""`GET /openapi.json`: the OpenAPI 3.1 document of the REST routes, generated from the
table they are served from (`edge.rest.ENDPOINTS`) and the models that parse and render
their bodies (`edge.rest_models`), so it cannot drift from what they do. Like GraphQL
introspection, it needs no key."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import orjson
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from queuelog.domain.roles import Capability, who_may
from queuelog.edge.http import JSON
from queuelog.edge.rest import COMMON, ENDPOINTS, STATUS, Endpoint
from queuelog.edge.rest_models import ErrorOut

PATH = "/openapi.json"
REF = "#/components/schemas/{model}"
# Job ids are decimal integers of at most 18 digits; any other text names no job (404).
JOB_ID = {"type": "integer", "minimum": 0, "maximum": 10**18 - 1}


def _version() -> str:
    try:
        return importlib.metadata.version("queuelog")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": REF.format(model=model.__name__)}


def _content(model: type[BaseModel]) -> dict[str, Any]:
    return {JSON: {"schema": _ref(model)}}


def _parameters(e: Endpoint) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = []
    if "{id}" in e.path:
        params.append({"name": "id", "in": "path", "required": True, "schema": JOB_ID})
    if e.query is not None:
        schema = e.query.model_json_schema()
        required = set(schema.get("required", ()))
        for name, prop in schema["properties"].items():
            prop = {k: v for k, v in prop.items() if k != "title"}
            description = prop.pop("description", None)
            param = {"name": name, "in": "query", "required": name in required, "schema": prop}
            if description:
                param["description"] = description
            params.append(param)
    return params


def _responses(e: Endpoint) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for status, model in e.answers.items():
        if model is None:
            out[str(status)] = {"description": "Nothing to answer."}
        else:
            out[str(status)] = {"description": "OK", "content": _content(model)}
    by_status: dict[int, list[str]] = {}
    for code in dict.fromkeys((*e.refusals, *COMMON)):
        by_status.setdefault(STATUS[code], []).append(str(code))
    for status in sorted(by_status):
        codes = ", ".join(by_status[status])
        out[str(status)] = {"description": f"Refused: {codes}.", "content": _content(ErrorOut)}
    return out


def _operation(e: Endpoint) -> dict[str, Any]:
    if e.capability is Capability.ANY:
        who = "Any live key: it sees only the jobs it may see."
    else:
        who = f"Needs {who_may(e.capability)}; another live key gets 403."
    op: dict[str, Any] = {
        "operationId": e.name,
        "summary": e.summary,
        "description": who,
        "parameters": _parameters(e),
        "responses": _responses(e),
    }
    if e.body is not None:
        required = bool(e.body.model_json_schema().get("required"))
        op["requestBody"] = {"required": required, "content": _content(e.body)}
    return op


def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of `ENDPOINTS`."""
    models: list[tuple[type[BaseModel], JsonSchemaMode]] = [(ErrorOut, "serialization")]
    for e in ENDPOINTS:
        if e.body is not None:
            models.append((e.body, "validation"))
        models += [(m, "serialization") for m in e.answers.values() if m is not None]
    _, defs = models_json_schema(list(dict.fromkeys(models)), ref_template=REF)
    paths: dict[str, dict[str, Any]] = {}
    for e in ENDPOINTS:
        paths.setdefault(e.path, {})[e.method.lower()] = _operation(e)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "queuelog REST API",
            "version": _version(),
            "description": "The job queue's REST routes, over the same service, keys and "
            "rules as its GraphQL API at /graphql. Every error is a JSON object with the "
            "`code` GraphQL gives the same refusal.",
        },
        "paths": paths,
        "components": {
            "schemas": defs.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }


def route() -> Route:
    body = orjson.dumps(document())

    async def serve(request: Request) -> Response:
        return Response(body, media_type=JSON)

    return Route(PATH, serve)
