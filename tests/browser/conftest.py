"""Headless Debian Chromium (scripts/ensure-chromium.sh), driven by Playwright for Python:
no browser is downloaded, and the page may reach nothing but the server under test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from playwright.async_api import Browser, Page, async_playwright

CHROMIUM = "/usr/bin/chromium"
# Runs before the page's own scripts (Playwright injects it, outside the page's CSP).
RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`);
});
"""


@pytest.fixture(scope="session")  # one Chromium per test process; a context per test
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            # Local Network Access would ask the user before a page on one loopback origin
            # reaches another; a deployed frontend and API are not both on loopback.
            args=["--no-sandbox", "--disable-gpu", "--disable-features=LocalNetworkAccessChecks"],
        )
        try:
            yield chromium
        finally:
            await chromium.close()


@dataclass
class Watched:
    """A page in a fresh browser context (its own storage), and what it did."""

    page: Page
    requested: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    bad_status: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    sockets: list[str] = field(default_factory=list)

    async def violations(self) -> Any:
        return await self.page.evaluate("window.__violations")


@pytest.fixture
async def watched(browser: Browser) -> AsyncIterator[Watched]:
    context = await browser.new_context()
    page = await context.new_page()
    await page.add_init_script(RECORD_VIOLATIONS)
    seen = Watched(page)
    page.on("request", lambda r: seen.requested.append(r.url))
    page.on("requestfailed", lambda r: seen.failed.append(r.url))
    page.on("response", lambda r: r.status >= 400 and seen.bad_status.append(r.url))
    page.on("pageerror", lambda e: seen.errors.append(str(e)))
    page.on("console", lambda m: m.type in ("error", "assert") and seen.errors.append(m.text))
    page.on("websocket", lambda ws: seen.sockets.append(ws.url))
    try:
        yield seen
    finally:
        await context.close()
