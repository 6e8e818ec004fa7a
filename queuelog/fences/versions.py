"""Whether code that leans on a library's private names may run here: the names it needs
imported, and the installed versions among those it was tested with. Shared by the fences
(`queuelog.fences`) and the GraphQL fast path (`queuelog.api.fastpath`)."""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version


def untested_versions(tested: Mapping[str, tuple[str, ...]]) -> list[str]:
    """The installed distributions (as "name version") of `tested` whose version is not in it."""
    out = []
    for name, versions in tested.items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            installed = "(not installed)"
        if installed not in versions:
            out.append(f"{name} {installed}")
    return out


def unusable_because(missing: str | None, tested: Mapping[str, tuple[str, ...]]) -> str | None:
    """Why such code cannot run here (None: it can): `missing` is the failed import, if any;
    `tested` the versions it was tested with, by distribution."""
    if missing is not None:
        return f"a name it needs is gone ({missing})"
    if untested := untested_versions(tested):
        return f"it was not tested with {', '.join(untested)}"
    return None
