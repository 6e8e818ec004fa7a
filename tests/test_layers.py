"""The layers import downward only: app → schema → resolvers → GraphQL types → service (auth
and events beside it) → storage; the client side imports none of the server."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "queuelog"

# Rank of each layer: a module may import only from layers of a lower or equal rank.
LAYERS: dict[str, int] = {
    "storage": 1,
    "service": 2,
    "events": 2,
    "auth": 2,
    "graphql_types": 3,
    "graphql_ops_types": 3,
    "resolvers": 4,
    "schema": 5,
}
# Imported by any layer; they import no layer.
BASE = {"config", "lifecycle", "singleflight", "tested_versions"}
CLIENT_SIDE = {"client", "worker"}
NO_GRAPHQL = {"service", "storage", "events", *BASE}
GRAPHQL_LIBRARIES = {"strawberry", "graphql"}


def _imports() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        found[name] = names
    return found


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _allowed(own: str, theirs: str) -> bool:
    """May a module of layer `own` import one of layer `theirs`?"""
    if own == theirs:
        return True
    if own in BASE:
        return theirs in BASE
    if own in CLIENT_SIDE:
        return theirs in CLIENT_SIDE
    if own in LAYERS:
        return theirs in BASE or (theirs in LAYERS and LAYERS[theirs] <= LAYERS[own])
    return True  # the app level (app, view, cli, runtime, …) may import anything


def test_layers_import_downward_only() -> None:
    upward = [
        f"{module} -> {target}"
        for module, imported in _imports().items()
        for target in imported
        if target.startswith("queuelog.") and not _allowed(_layer(module), _layer(target))
    ]
    assert upward == []


def test_service_storage_events_and_config_import_no_graphql_library() -> None:
    offending = [
        f"{module} -> {target}"
        for module, imported in _imports().items()
        if _layer(module) in NO_GRAPHQL
        for target in imported
        if target.split(".")[0] in GRAPHQL_LIBRARIES
    ]
    assert offending == []
