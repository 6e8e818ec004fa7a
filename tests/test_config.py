"""Settings: job types from the environment, per-type defaults from TOML."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from queuelog.config import Settings


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("QUEUELOG_JOB_TYPES", "QUEUELOG_DATABASE_URL", "QUEUELOG_SQLITE_SYNCHRONOUS"):
        monkeypatch.delenv(var, raising=False)
    s = Settings()
    assert s.job_types == ("email", "pdf", "sync")
    assert s.database_url == "sqlite:///./queuelog.db"
    assert s.sqlite_synchronous == "FULL"


def test_job_types_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUEUELOG_JOB_TYPES", " resize, transcode ,,notify")
    assert Settings().job_types == ("resize", "transcode", "notify")


@pytest.mark.parametrize("value", ["", " , ", "has space", "tab\there"])
def test_bad_job_types_are_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("QUEUELOG_JOB_TYPES", value)
    with pytest.raises(ValidationError):
        Settings()


def test_per_type_defaults_from_toml(tmp_path: Path) -> None:
    cfg = tmp_path / "queuelog.toml"
    cfg.write_text(
        "[types.email]\nlease_seconds = 60\nbackoff_base_seconds = 0\n\n"
        "[types.pdf]\nbackoff_max_seconds = 10\n"
    )
    types = Settings(config=cfg, default_lease_seconds=300).type_configs()
    assert types["email"].lease_seconds == 60
    assert types["email"].backoff_base_seconds == 0
    assert types["pdf"].lease_seconds == 300
    assert types["pdf"].backoff_max_seconds == 10
    assert types["sync"].backoff_max_seconds == 3600


def test_toml_for_an_unconfigured_type_is_an_error(tmp_path: Path) -> None:
    cfg = tmp_path / "queuelog.toml"
    cfg.write_text("[types.video]\nlease_seconds = 60\n")
    with pytest.raises(ValueError, match=r"\[types.video\] is not a configured job type"):
        Settings(config=cfg).type_configs()


def test_toml_with_an_unknown_setting_is_an_error(tmp_path: Path) -> None:
    cfg = tmp_path / "queuelog.toml"
    cfg.write_text("[types.email]\nlease_secs = 60\n")
    with pytest.raises(ValidationError, match="lease_secs"):
        Settings(config=cfg).type_configs()


def test_synchronous_normal_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUEUELOG_SQLITE_SYNCHRONOUS", "NORMAL")
    assert Settings().sqlite_synchronous == "NORMAL"
    monkeypatch.setenv("QUEUELOG_SQLITE_SYNCHRONOUS", "OFF")
    with pytest.raises(ValidationError):
        Settings()
