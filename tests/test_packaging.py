"""The installed package imports only what it declares: every module of `queuelog` imports
in a fresh interpreter, what it imports itself is a declared runtime dependency, and nothing
it pulls in comes from outside those dependencies and their own requirements (the test
extra stays out)."""

from __future__ import annotations

import ast
import functools
import importlib.metadata as metadata
import json
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "queuelog"
# Alembic runs these itself, inside its migration context; they cannot be imported alone.
RUN_BY_ALEMBIC = PACKAGE / "storage" / "migrations"


def declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(spec) for spec in project["dependencies"]]


def closure(requirements: Iterable[Requirement]) -> set[str]:
    """The declared distributions and, transitively, everything they require as installed
    here (with the extras asked for, and the markers of this interpreter)."""
    seen: set[str] = set()
    todo = [(r, frozenset(r.extras)) for r in requirements]
    while todo:
        req, extras = todo.pop()
        name = canonicalize_name(req.name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # not installed for this platform or Python: imports nothing here
        key = f"{name}[{','.join(sorted(extras))}]"
        if key in seen:
            continue
        seen.add(key)
        for spec in dist.requires or ():
            sub = Requirement(spec)
            wanted = any(
                sub.marker is None or sub.marker.evaluate({"extra": extra})
                for extra in ("", *extras)
            )
            if wanted:
                todo.append((sub, frozenset(sub.extras)))
    return {key.split("[", 1)[0] for key in seen}


@functools.cache
def providers() -> dict[str, frozenset[str]]:
    """Each importable top-level name, and the distributions that install it."""
    return {
        top: frozenset(canonicalize_name(d) for d in dists)
        for top, dists in metadata.packages_distributions().items()
    }


def distributions_of(top_level: str) -> frozenset[str]:
    return providers().get(top_level, frozenset())


def is_third_party(top_level: str) -> bool:
    return top_level not in sys.stdlib_module_names and top_level not in ("queuelog", "__main__")


def module_names() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if RUN_BY_ALEMBIC in path.parents or path.name == "__main__.py":  # runs, not imported
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def optional_features() -> set[str]:
    """The distributions of the package's own optional extras (e.g. `otel`), whose modules
    import them only when the feature is on; the test extra is not one."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get(
        "optional-dependencies", {}
    )
    return {
        canonicalize_name(Requirement(spec).name)
        for group, specs in extras.items()
        if group != "test"
        for spec in specs
    }


def test_every_import_of_the_package_is_a_declared_dependency() -> None:
    runtime = {canonicalize_name(r.name) for r in declared()} | optional_features()
    undeclared = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if is_third_party(top) and not distributions_of(top) & runtime:
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    undeclared.append(f"{where} imports {top} ({distributions_of(top) or '?'})")
    assert undeclared == [], "declare these in [project].dependencies:\n" + "\n".join(undeclared)


# Run in a fresh interpreter: refuse every module that only an undeclared distribution
# provides, as an install with the runtime dependencies alone would, then import it all.
IMPORT_ALL = """
import importlib, importlib.abc, json, sys

blocked, modules = json.loads(sys.argv[1])

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Refuse())
for module in modules:
    importlib.import_module(module)
"""


def test_every_module_imports_with_only_the_runtime_dependencies() -> None:
    allowed = closure(declared())
    blocked = sorted(
        top for top, dists in providers().items() if is_third_party(top) and not dists & allowed
    )
    assert "pytest" in blocked  # the test extra's, not the package's
    done = subprocess.run(
        [sys.executable, "-I", "-c", IMPORT_ALL, json.dumps([blocked, module_names()])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
