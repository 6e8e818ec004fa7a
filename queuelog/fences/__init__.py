"""Where queuelog goes around a framework rather than through its public API, fenced.

Each fence is one module that imports the framework's private names, beside the versions
it was tested with; a setting turns it off, and when it is off, or the installed version was
not tested, or an import fails, the framework's own behaviour serves instead (with one
warning when that was not asked for). docs/design.md lists the fences and what each
fallback loses.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from queuelog.fences.versions import unusable_because

log = logging.getLogger("queuelog.fences")


def unavailable(fence: str, missing: str | None, tested: Mapping[str, str]) -> str | None:
    """Why the fence `fence` cannot be used here (None: it can): `missing` is the failed
    import, if any. The reason is logged as one warning."""
    reason = unusable_because(missing, tested)
    if reason is not None:
        log.warning("%s is off: %s; the framework's own behaviour serves instead", fence, reason)
    return reason
