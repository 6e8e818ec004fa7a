"""Where queuelog goes around a framework rather than through its public API, fenced.

Each fence is one module that imports the framework's private names, beside the versions
it was tested with; a setting turns it off, and when it is off, or the installed version was
not tested, or an import fails, the framework's own behaviour serves instead (with one
warning when that was not asked for). docs/design.md lists the fences and what each
fallback loses.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping

from queuelog.config import Settings
from queuelog.fences.versions import unusable_because

log = logging.getLogger("queuelog.fences")


def unavailable(fence: str, missing: str | None, tested: Mapping[str, str]) -> str | None:
    """Why the fence `fence` cannot be used here (None: it can): `missing` is the failed
    import, if any. The reason is logged as one warning."""
    reason = unusable_because(missing, tested)
    if reason is not None:
        log.warning("%s is off: %s; the framework's own behaviour serves instead", fence, reason)
    return reason


# Each fence: its setting, its module, and the names of that module's failed import and tested
# ranges (`None`: the module raises ImportError itself when a name is gone).
_FENCES = {
    "bounded_http_protocol": ("queuelog.fences.uvicorn_http", "MISSING"),
    "strict_websocket": ("queuelog.fences.strawberry_ws", None),
    "prepared_operations": ("queuelog.fences.graphql_core", "FAST_PATH_MISSING"),
}


def states(settings: Settings) -> dict[str, str]:
    """Each fence's state in this process, by setting name: "on", "switched off", or
    "unavailable: <why>" (the framework's own behaviour serves). For /readyz."""
    out = {}
    for setting, (module_name, missing_name) in _FENCES.items():
        if not getattr(settings, setting):
            out[setting] = "switched off"
            continue
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            out[setting] = f"unavailable: a name it needs is gone ({exc})"
            continue
        missing = getattr(module, missing_name) if missing_name else None
        reason = unusable_because(missing, module.TESTED)
        out[setting] = "on" if reason is None else f"unavailable: {reason}"
    return out
