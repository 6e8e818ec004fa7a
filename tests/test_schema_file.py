"""The committed `schema.graphql` is what the code exports, and it keeps the contract."""

from __future__ import annotations

import difflib
import subprocess
import sys
from pathlib import Path

import pytest

from queuelog.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"


def _exported(capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["export-schema"]) == 0
    return capsys.readouterr().out


def test_committed_schema_matches_the_code(capsys: pytest.CaptureFixture[str]) -> None:
    exported = _exported(capsys)
    committed = (ROOT / "schema.graphql").read_text()
    if committed != exported:
        diff = "".join(
            difflib.unified_diff(
                committed.splitlines(keepends=True),
                exported.splitlines(keepends=True),
                "schema.graphql (committed)",
                "queuelog export-schema",
            )
        )
        pytest.fail(f"schema.graphql is stale: run `make schema` and commit it.\n{diff}")


def test_exported_schema_contains_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    check = SHARED / "tools" / "check_contract.py"
    if not SHARED.is_dir():
        pytest.skip(f"no {SHARED}: the shared contract is not checked out beside this repo")
    out = subprocess.run(
        [sys.executable, str(check), str(SHARED / "contract" / "schema.graphql")],
        input=_exported(capsys),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
