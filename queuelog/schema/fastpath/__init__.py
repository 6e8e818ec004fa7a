"""The fast path: prepared operations (a short way through execution for the documents
clients send again and again), shared subscription results, and inputs built straight from
graphql-core's values. Behind QUEUELOG_PREPARED_OPERATIONS and the tested-versions check in
`compat`: when either says no, everything is served through strawberry's generic path.
"""

from __future__ import annotations

import functools
import importlib
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from queuelog.schema.fastpath.engine import FastPath

log = logging.getLogger("queuelog.fastpath")


@functools.cache
def _unavailable() -> str | None:
    """Why this process cannot have the fast path (None: it can), logged once."""
    from queuelog.schema.fastpath import compat

    reason = None
    if compat.FAST_PATH_MISSING is not None:
        reason = f"a name it needs is gone ({compat.FAST_PATH_MISSING})"
    elif untested := compat.untested_versions():
        reason = f"it was not tested with {', '.join(untested)}"
    else:
        try:
            importlib.import_module("queuelog.schema.fastpath.engine")
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
    from queuelog.schema.fastpath.engine import FastPath

    return FastPath()
