"""What the dashboard's browser tests share: a server with a few job types, signing in
through the page's own form, and the checks every test ends with."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.async_api import Page, expect

from tests.browser.conftest import Watched
from tests.support import LiveServer, session_server

# Few types, so the overview shows a card each; every test uses its own.
TYPES = ("email", "pdf", "sync", "report", "resize", "export", "digest", "upload")
ENQUEUE = """mutation($input: EnqueueJobInput!) {
  enqueueJob(input: $input) { job { id status } userErrors { code message } }
}"""
CLAIM = """mutation($types: [String!]) {
  claimJob(types: $types) { job { id } userErrors { code } }
}"""
FAIL = """mutation($id: ID!, $error: String!) {
  failJob(id: $id, error: $error, retryable: false) { job { status } userErrors { code } }
}"""


def origin(server: LiveServer) -> str:
    return f"http://127.0.0.1:{server.port}"


def dashboard_server(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[LiveServer]:
    yield from session_server(tmp_path_factory, "sqlite", name, job_types=",".join(TYPES))


def enqueue(server: LiveServer, key: str, **input: Any) -> str:
    """Enqueue a job over HTTP (as another client would); its id."""
    out = server.gql(ENQUEUE, {"input": input}, key)["enqueueJob"]
    assert out["userErrors"] == [], out
    return str(out["job"]["id"])


async def sign_in(page: Page, server: LiveServer, key: str, path: str = "/dashboard") -> None:
    """Open the dashboard and sign in with `key` through its form."""
    await page.goto(origin(server) + path)
    await page.get_by_label("API key").fill(key)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("button", name="Sign out")).to_be_visible()


async def live(page: Page) -> None:
    """Wait until the page's subscription socket is acknowledged and its subscribe sent."""
    await expect(page.locator(".live[data-state='live']")).to_be_visible()
    await page.wait_for_timeout(500)  # the server registers the subscription


async def assert_clean(watched: Watched) -> None:
    """No console error, no failed request or error status, no CSP violation."""
    assert await watched.violations() == []
    assert not watched.errors, watched.errors
    assert not watched.failed and not watched.bad_status, (watched.failed, watched.bad_status)
