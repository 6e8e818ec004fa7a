"""Whether code that leans on a library's private names may run here: the names it needs
imported, and the installed versions within the ranges it is tested with. Shared by the fences
(`queuelog.fences`) and the GraphQL fast path (`queuelog.api.fastpath`)."""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version

from packaging.specifiers import SpecifierSet


def untested_versions(tested: Mapping[str, str]) -> list[str]:
    """The installed distributions (as "name version") of `tested` whose version is outside
    the range given for it (a PEP 440 specifier such as ">=0.54,<0.56")."""
    out = []
    for name, tested_range in tested.items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            out.append(f"{name} (not installed)")
            continue
        if installed not in SpecifierSet(tested_range):
            out.append(f"{name} {installed}")
    return out


def unusable_because(missing: str | None, tested: Mapping[str, str]) -> str | None:
    """Why such code cannot run here (None: it can): `missing` is the failed import, if any;
    `tested` the ranges of versions it is tested with, by distribution."""
    if missing is not None:
        return f"a name it needs is gone ({missing})"
    if untested := untested_versions(tested):
        return f"it was not tested with {', '.join(untested)}"
    return None
