"""Runs every operation of graphiql.md, in order, against a fresh server on each backend."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.support import ADMIN_SECRET, LiveServer

DOC = Path(__file__).resolve().parent.parent / "graphiql.md"
BLOCK = re.compile(r"<!-- as: ([\w-]+)(?:, expect: (\w+))? -->\n```graphql\n(.*?)```", re.S)


def operations() -> list[tuple[str, str | None, str]]:
    found = [(m.group(1), m.group(2), m.group(3)) for m in BLOCK.finditer(DOC.read_text())]
    assert len(found) == DOC.read_text().count("```graphql"), "every block needs an as: line"
    return found


def user_errors(data: Any) -> list[dict[str, Any]]:
    """Every userErrors entry anywhere in a response's data."""
    if isinstance(data, dict):
        own = data.get("userErrors") or []
        return own + [e for v in data.values() for e in user_errors(v)]
    if isinstance(data, list):
        return [e for v in data for e in user_errors(v)]
    return []


def wait_for_run_at(data: Any) -> None:
    """Like a person who waits for a retried job's runAt before claiming it again."""
    job = (data.get("failJob") or {}).get("job") if isinstance(data, dict) else None
    if job and job["status"] == "PENDING":
        delay = (datetime.fromisoformat(job["runAt"]) - datetime.now(UTC)).total_seconds()
        time.sleep(max(0.0, delay) + 0.05)


def test_every_operation_in_graphiql_md(start_server: Callable[..., LiveServer]) -> None:
    keys = {"admin": ADMIN_SECRET}
    results: dict[str, Any] = {}
    server = start_server()
    for who, expect, query in operations():
        name = re.search(r"(?:query|mutation)\s+(\w+)", query)
        assert name, f"name every operation in graphiql.md: {query[:40]}"
        body = server.post(query, key=keys[who]).json()
        codes = [e.get("extensions", {}).get("code") for e in body.get("errors", [])]
        codes += [e["code"] for e in user_errors(body.get("data"))]
        if expect:
            assert expect in codes, (name.group(1), body)
        else:
            assert not codes, (name.group(1), body)
        data = body.get("data") or {}
        results[name.group(1)] = data
        for alias in ("producer", "worker"):
            made = data.get(alias) if isinstance(data.get(alias), dict) else None
            if made and made.get("secret"):
                keys[made["apiKey"]["name"]] = made["secret"]
        wait_for_run_at(data)

    assert results["Enqueue"]["enqueueJob"]["job"]["id"] == "1"
    assert results["Fail"]["failJob"]["willRetry"] is True
    assert results["ClaimAgain"]["claimJob"]["job"]["retryCount"] == 1
    mine = results["MyJob"]["job"]
    assert mine["status"] == "COMPLETED" and mine["result"] == {"messageId": "m-42"}
    assert mine["error"] is None
    assert [e["status"] for e in mine["events"]] == [
        "PENDING",
        "RUNNING",
        "PENDING",
        "RUNNING",
        "COMPLETED",
    ]
    error = results["AdminView"]["job"]["error"]
    assert "hunter2" not in error and "[REDACTED]" in error
    assert results["Revoke"]["revokeApiKey"] is True
