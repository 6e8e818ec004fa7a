"""Worker error texts lose their secrets before they are stored (V-10)."""

from __future__ import annotations

import pytest

from queuelog.service.sanitize import REDACTED, sanitize_error

JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq9Xs1secretbody\n"
    "Zm9vYmFy\n-----END RSA PRIVATE KEY-----"
)

SECRETS = [
    ("postgres DSN", "could not connect to postgresql://app:s3cr3t-pw@db:5432/jobs", "s3cr3t-pw"),
    ("redis URL", "redis://:hunter2hunter2@cache:6379/0 refused", "hunter2hunter2"),
    ("bearer token", "401 with Authorization: Bearer abcdef123456789xyz", "abcdef123456789xyz"),
    ("password=", "login failed: user=bob password=correct-horse", "correct-horse"),
    ("JSON secret", 'config {"api_key": "k-99887766"} rejected', "k-99887766"),
    (
        "queuelog key",
        "retry with ql_live_0123456789abcdefXYZ please",
        "ql_live_0123456789abcdefXYZ",
    ),
    (
        "queuelog key, current format",
        "retry with qlk_0123456789abcdefghijABCDEFGHIJ0123456789abc1a2B3c please",
        "qlk_0123456789abcdefghijABCDEFGHIJ0123456789abc1a2B3c",
    ),
    ("AWS access key", "denied for AKIAIOSFODNN7EXAMPLE in us-east-1", "AKIAIOSFODNN7EXAMPLE"),
    ("JWT", f"token expired: {JWT}", JWT),
    ("GitHub token", "push failed ghp_aBcD1234eFgH5678iJkL", "ghp_aBcD1234eFgH5678iJkL"),
    ("PEM key", f"bad key:\n{PEM}\nend", "secretbody"),
]


@pytest.mark.parametrize(("text", "secret"), [s[1:] for s in SECRETS], ids=[s[0] for s in SECRETS])
def test_secrets_are_redacted(text: str, secret: str) -> None:
    out = sanitize_error(text, 2_000)
    assert secret not in out
    assert REDACTED in out


def test_the_rest_of_the_message_is_kept() -> None:
    out = sanitize_error("could not connect to postgresql://app:pw@db:5432/jobs: timeout", 2_000)
    assert out == f"could not connect to postgresql://{REDACTED}@db:5432/jobs: timeout"
    plain = "SMTP 550: mailbox unavailable for a@example.com (id=42, retry in 5s)"
    assert sanitize_error(plain, 2_000) == plain


def test_control_characters_are_removed_but_newlines_and_tabs_kept() -> None:
    out = sanitize_error("a\x00b\x1b[31mc\x7fd\ne\tf\rg", 2_000)
    assert out == "ab[31mcd\ne\tf\rg"


def test_length_is_capped() -> None:
    out = sanitize_error("x" * 10_000, 100)
    assert len(out) == 100 and out.endswith("[truncated]")
    assert sanitize_error("y" * 100, 100) == "y" * 100


def test_a_secret_cut_by_the_cap_is_still_redacted() -> None:
    out = sanitize_error("p" * 60 + " password=abcdefghijklmnopqrstuvwxyz", 80)
    assert "abcdefghijklm" not in out and len(out) <= 80
