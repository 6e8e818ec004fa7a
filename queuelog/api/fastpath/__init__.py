"""The fast path: prepared operations (a short way through execution for the documents
clients send again and again), shared subscription results, and inputs built straight from
graphql-core's values. Behind QUEUELOG_PREPARED_OPERATIONS and the check of the names and
versions `queuelog.fences.graphql_core` lists (`queuelog.fences.versions`): when either
says no, everything is served through strawberry's generic path.
"""

from __future__ import annotations

import functools
import importlib
import logging
from typing import TYPE_CHECKING

from queuelog.fences.versions import unusable_because

if TYPE_CHECKING:
    from queuelog.api.fastpath.engine import FastPath

log = logging.getLogger("queuelog.fastpath")


@functools.cache
def _unavailable() -> str | None:
    """Why this process cannot have the fast path (None: it can), logged once."""
    from queuelog.fences import graphql_core as compat

    reason = unusable_because(compat.FAST_PATH_MISSING, compat.TESTED)
    if reason is None:
        try:
            importlib.import_module("queuelog.api.fastpath.engine")
        except (ImportError, AttributeError) as exc:
            reason = f"it failed to load ({type(exc).__name__}: {exc})"
    if reason is not None:
        log.warning(
            "prepared operations are off: %s; serving every operation through "
            "strawberry's generic path",
            reason,
        )
    return reason


def load(enabled: bool) -> FastPath | None:
    """The fast path, or None when it is switched off or cannot be had here."""
    if not enabled or _unavailable() is not None:
        return None
    from queuelog.api.fastpath.engine import FastPath

    return FastPath()
