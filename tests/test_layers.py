"""The layers import downward only, and no modules import each other in a circle.

Every import counts: absolute and relative, at the top of a module, inside a function and under
`TYPE_CHECKING`. Each module belongs to the layer of the longest prefix in `RANKS`; a module may
import its own layer and layers of a lower rank, never a layer of its rank or above. A module
under no prefix fails the test, so a new package must be given its place here."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "queuelog"

# The server, bottom to top.
RANKS: dict[str, int] = {
    "queuelog.domain": 0,  # the state machine: imports nothing of queuelog
    "queuelog.config": 1,
    "queuelog.singleflight": 1,
    "queuelog.fences": 2,  # every bypass of a dependency; given the rules they enforce
    "queuelog.storage": 3,
    "queuelog.service": 4,
    "queuelog.auth": 5,
    "queuelog.events": 6,
    "queuelog.runtime": 7,
    "queuelog.api.types": 8,
    "queuelog.api.resolvers": 9,
    "queuelog.api.fastpath": 10,
    "queuelog.api": 11,
    "queuelog.edge": 12,
    "queuelog.cli": 13,
    "queuelog": 14,  # the package itself
}
# The client side: it may import the domain and itself, never the server.
CLIENT_RANKS: dict[str, int] = {"queuelog.client": 1, "queuelog.worker": 2}
SHARED_WITH_CLIENTS = {"queuelog.domain"}
CLIENT_USERS = {"queuelog.cli"}  # the command line runs workers and talks to servers
NO_GRAPHQL = {"queuelog.domain", "queuelog.storage", "queuelog.service", "queuelog.events"}
GRAPHQL_LIBRARIES = {"strawberry", "graphql"}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imported(module: str, path: Path, modules: Mapping[str, Path]) -> Iterator[str]:
    """Every name `module` imports, resolved to an absolute dotted name."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            # `from a import b` imports module a.b where there is one, else names of a
            yield from (f"{base}.{alias.name}" for alias in node.names)
            if not all(f"{base}.{alias.name}" in modules for alias in node.names):
                yield base


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        module: {
            name for name in _imported(module, path, modules) if name in modules and name != module
        }
        for module, path in modules.items()
    }


def _layer(module: str, ranks: dict[str, int]) -> str | None:
    matches = [p for p in ranks if module == p or (module.startswith(p + ".") and p != "queuelog")]
    return max(matches, key=len) if matches else None


def _refusal(source: str, target: str) -> str | None:
    """Why `source` may not import `target` (None: it may)."""
    if _layer(source, CLIENT_RANKS):
        theirs = _layer(target, CLIENT_RANKS)
        if theirs is None:
            return None if _layer(target, RANKS) in SHARED_WITH_CLIENTS else "server from client"
        own = _layer(source, CLIENT_RANKS)
        assert own is not None
        return None if own == theirs or CLIENT_RANKS[theirs] < CLIENT_RANKS[own] else "upward"
    own, theirs = _layer(source, RANKS), _layer(target, RANKS)
    if own is None:
        return "module has no layer"
    if theirs is None:
        return None if own in CLIENT_USERS else "client from server"
    if own == theirs or RANKS[theirs] < RANKS[own]:
        return None
    return "upward" if RANKS[theirs] > RANKS[own] else "same rank"


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{source} -> {target}: {why}"
        for source, targets in graph.items()
        for target in targets
        if (why := _refusal(source, target))
    )


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph.get(node, ()):
            # `import a.b` imports package `a` too; a package's own submodules are not a cycle
            if succ not in graph or node.startswith(succ + "."):
                continue
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_module_has_a_layer() -> None:
    assert [m for m in _modules() if not (_layer(m, RANKS) or _layer(m, CLIENT_RANKS))] == []


def test_layers_import_downward_only() -> None:
    assert upward_imports(_graph()) == []


def test_no_modules_import_each_other_in_a_circle() -> None:
    assert cycles(_graph()) == []


def test_a_probe_upward_import_or_cycle_fails() -> None:
    graph = _graph()
    graph["queuelog.storage.jobs"] = graph["queuelog.storage.jobs"] | {"queuelog.service.jobs"}
    assert "queuelog.storage.jobs -> queuelog.service.jobs: upward" in upward_imports(graph)
    graph["queuelog.auth.keys"] = graph["queuelog.auth.keys"] | {"queuelog.events.feed"}
    assert "queuelog.auth.keys -> queuelog.events.feed: upward" in upward_imports(graph)
    graph["queuelog.client.models"] = graph["queuelog.client.models"] | {"queuelog.config"}
    assert any(
        line.startswith("queuelog.client.models -> queuelog.config")
        for line in upward_imports(graph)
    )
    graph["queuelog.service.jobs"] = graph["queuelog.service.jobs"] | {"queuelog.service.bulk"}
    graph["queuelog.service.bulk"] = graph["queuelog.service.bulk"] | {"queuelog.service.jobs"}
    assert any("queuelog.service.bulk" in c and "queuelog.service.jobs" in c for c in cycles(graph))


def test_rules_and_storage_import_no_graphql_library() -> None:
    modules = _modules()
    offending = [
        f"{module} -> {name}"
        for module, path in modules.items()
        if _layer(module, RANKS) in NO_GRAPHQL
        for name in _imported(module, path, modules)
        if name.split(".")[0] in GRAPHQL_LIBRARIES
    ]
    assert offending == []
