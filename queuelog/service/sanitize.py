"""Worker error texts are stored only after secrets are cut out of them (V-10)."""

from __future__ import annotations

import re

REDACTED = "[REDACTED]"
TRUNCATED = " …[truncated]"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # scheme://user:password@host -> scheme://[REDACTED]@host (DSNs, URLs with credentials)
    (re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/@:]*:[^\s/@]*@"), rf"\1{REDACTED}@"),
    # Authorization headers and bearer tokens
    (re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=\-]{8,}"), rf"\1 {REDACTED}"),
    # key=value / key: value for secret-looking keys
    (
        re.compile(
            r"(?i)\b([\w\-]*(?:password|passwd|pwd|secret|token|api[_\-]?key|apikey|"
            r"access[_\-]?key|private[_\-]?key|credential|auth)[\w\-]*)"
            r"(\s*[=:]\s*[\"']?|\"\s*:\s*\"|'\s*:\s*')[^\s,;&'\"]+"
        ),
        rf"\1\2{REDACTED}",
    ),
    # queuelog secrets, AWS access keys, GitHub/Slack/Stripe-style tokens, JWTs
    (re.compile(r"\bqlk?_[A-Za-z0-9_\-]{16,}"), REDACTED),
    (re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), REDACTED),
    (re.compile(r"\b(?:gh[pousr]_|xox[abpr]-|sk_live_|sk_test_)[A-Za-z0-9\-_]{10,}"), REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+"), REDACTED),
    # PEM private key blocks
    (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.S
        ),
        REDACTED,
    ),
)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def sanitize_error(text: str, max_chars: int) -> str:
    """Redact credentials, tokens and DSN passwords; drop control characters; cap the length."""
    text = _CONTROL.sub("", text)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    if len(text) > max_chars:
        text = text[: max_chars - len(TRUNCATED)] + TRUNCATED
    return text
