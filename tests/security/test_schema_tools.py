"""Introspection-driven tools read the schema: graphql-js (what GraphiQL, graphql-codegen,
get-graphql-schema and graphql-inspector build on) rebuilds and prints it from the live
server's introspection, and no input field or argument has an object default (which
graphql-js cannot turn back into a literal)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from graphql import get_introspection_query

from queuelog.api.schema import build_schema
from tests.security.http import send
from tests.support import ADMIN_SECRET, LiveServer

# Installed once per virtualenv, beside it (tests run offline once it is there).
GRAPHQL_JS = Path(sys.prefix) / "graphql-js"
PRINT = """
const { buildClientSchema, printSchema } = require("graphql");
const introspection = JSON.parse(require("fs").readFileSync(0, "utf8"));
process.stdout.write(printSchema(buildClientSchema(introspection)));
"""


def graphql_js() -> Path:
    """A directory whose node_modules holds graphql-js, installed from npm if missing."""
    if (GRAPHQL_JS / "node_modules" / "graphql" / "package.json").exists():
        return GRAPHQL_JS
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node.js and npm are not installed")
    GRAPHQL_JS.mkdir(parents=True, exist_ok=True)
    install = subprocess.run(
        ["npm", "install", "--prefix", str(GRAPHQL_JS), "--no-audit", "--no-fund", "graphql@16"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if install.returncode != 0:
        pytest.skip(f"npm could not install graphql: {install.stderr[-500:]}")
    return GRAPHQL_JS


def live_introspection(server: LiveServer) -> dict[str, Any]:
    body = send(server, get_introspection_query(descriptions=True), key=ADMIN_SECRET).json()
    assert "errors" not in body, body
    return dict(body["data"])


def test_graphql_js_rebuilds_and_prints_the_live_schema(edge: LiveServer) -> None:
    printed = subprocess.run(
        ["node", "-e", PRINT],
        cwd=graphql_js(),
        input=json.dumps(live_introspection(edge)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert printed.returncode == 0, printed.stderr
    enqueue_input = printed.stdout.split("input EnqueueJobInput {", 1)[1].split("\n}", 1)[0]
    assert "  payload: JSON\n" in enqueue_input, enqueue_input


def _object_defaults(types: list[dict[str, Any]]) -> list[str]:
    found = []
    for t in types:
        values = [*(t.get("inputFields") or [])]
        for field in t.get("fields") or []:
            values += [{**a, "name": f"{field['name']}({a['name']})"} for a in field["args"]]
        for value in values:
            default = value.get("defaultValue")
            if default is not None and default.lstrip()[:1] in ("{", "["):
                found.append(f"{t['name']}.{value['name']} = {default}")
    return found


def test_no_input_has_an_object_default(edge: LiveServer) -> None:
    assert _object_defaults(live_introspection(edge)["__schema"]["types"]) == []
    for type_ in build_schema()._schema.type_map.values():
        for name, field in getattr(type_, "fields", {}).items():
            default = getattr(field, "default_value", None)
            assert not isinstance(default, dict | list), f"{type_}.{name}"


def test_payload_left_out_or_null_is_an_empty_object(edge: LiveServer, job_type: str) -> None:
    enqueue = "mutation($i: EnqueueJobInput!) { enqueueJob(input: $i) { job { payload } } }"
    for given in ({"type": job_type}, {"type": job_type, "payload": None}):
        job = edge.gql(enqueue, {"i": given}, ADMIN_SECRET)["enqueueJob"]["job"]
        assert job == {"payload": {}}
    literal = f'mutation {{ enqueueJob(input: {{type: "{job_type}"}}) {{ job {{ payload }} }} }}'
    assert edge.gql(literal, key=ADMIN_SECRET)["enqueueJob"]["job"] == {"payload": {}}
