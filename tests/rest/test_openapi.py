"""`GET /openapi.json`: a valid OpenAPI 3.1 document (openapi-spec-validator), generated
from the routes' own table, so every route it names is served; and a bounded fuzz of it
(schemathesis) with every role's key and none, on a server of the test's own: no answer
is a 5xx, or has a status, media type or body the document does not declare."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from openapi_spec_validator import validate
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from queuelog.edge import openapi
from queuelog.edge.rest import ENDPOINTS
from tests.rest.client import base, call, ok
from tests.support import ADMIN_SECRET, LiveServer

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
EXAMPLES = 5  # a case per operation, role and mode: bounded to about a minute a backend


def test_openapi_document_is_valid_and_served_as_generated(server: LiveServer) -> None:
    doc = ok(call(server, "GET", "/openapi.json"))  # no key needed, like introspection
    validate(doc)
    assert doc == openapi.document()
    served = {(e.method.lower(), e.path) for e in ENDPOINTS}
    assert {(m, p) for p, ops in doc["paths"].items() for m in ops} == served
    for method, path in served:
        resp = call(server, method.upper(), path.replace("{id}", "1"), ADMIN_SECRET)
        assert resp.status_code not in (405, 501), (method, path, resp.text)
        assert str(resp.status_code) in doc["paths"][path][method]["responses"], (method, path)


def test_openapi_fuzz_as_each_role(start_server: Callable[..., LiveServer]) -> None:
    server = start_server()
    keys: dict[str, str | None] = {  # each role, and no key
        "none": None,
        "admin": ADMIN_SECRET,
        **{r.lower(): server.create_key(r, ["email"]) for r in ("PRODUCER", "WORKER", "VIEWER")},
    }
    schema = schemathesis.openapi.from_dict(ok(call(server, "GET", "/openapi.json")))
    operations = [op.ok() for op in schema.get_all_operations()]
    assert len(operations) == len(ENDPOINTS)
    url = base(server)
    for key in keys.values():
        headers = {} if key is None else {"Authorization": f"Bearer {key}"}
        for operation in operations:
            for mode in GenerationMode:
                _fuzz(operation.as_strategy(generation_mode=mode), url, headers)


def _fuzz(strategy: Any, url: str, headers: dict[str, str]) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def run(case: Any) -> None:
        if isinstance(case.body, dict) and case.body.get("wait_seconds"):
            case.body["wait_seconds"] = 0  # a long poll would only slow the fuzz down
        case.call_and_validate(base_url=url, headers=headers, checks=CHECKS)

    run()
