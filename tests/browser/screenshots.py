"""The dashboard's screenshots in the docs (docs/dashboard-overview.png and
docs/dashboard-job.png, 1280 px wide): a live server on a fresh SQLite database, jobs of a
few types in every state through the API, and the page in headless Chromium.

Run: `.venv/bin/python -m tests.browser.screenshots`."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from playwright.async_api import async_playwright, expect

from tests.browser.conftest import CHROMIUM
from tests.browser.dashboard_support import enqueue, origin, sign_in
from tests.support import ADMIN_SECRET, LiveServer, live_server

DOCS = Path(__file__).resolve().parents[2] / "docs"
TYPES = ("email", "pdf", "thumbnail", "webhook")
CLAIM = "mutation($t: [String!]) { claimJob(types: $t) { job { id type } } }"
COMPLETE = "mutation($id: ID!, $r: JSON) { completeJob(id: $id, result: $r) { job { id } } }"
FAIL = """mutation($id: ID!, $e: String!, $r: Boolean) {
  failJob(id: $id, error: $e, retryable: $r) { job { id } } }"""
LIMITS = """mutation($t: String!, $l: JobTypeLimitsInput!) {
  setJobTypeLimits(type: $t, limits: $l) { userErrors { code } } }"""
HEARTBEAT = "mutation($id: ID!, $p: JSON) { heartbeatJob(id: $id, progress: $p) { job { id } } }"


def claim(server: LiveServer, key: str, job_type: str) -> str:
    return str(server.gql(CLAIM, {"t": [job_type]}, key)["claimJob"]["job"]["id"])


def seed(server: LiveServer) -> str:
    """Jobs in every state; the id of one with a retried attempt, progress and a result."""
    shop = server.create_key("PRODUCER", list(TYPES), "HIGH", name="shop-web")
    worker = server.create_key("WORKER", list(TYPES), name="worker-1")
    for n in range(14):
        enqueue(
            server,
            shop,
            type="email",
            payload={"to": f"user{n}@example.com", "template": "welcome"},
        )
    for n in range(6):
        enqueue(server, shop, type="pdf", payload={"invoice": 1000 + n})
    for n in range(9):
        enqueue(server, shop, type="thumbnail", payload={"image": f"img/{n}.jpg", "size": 256})
    for _ in range(4):
        enqueue(server, shop, type="webhook", payload={"url": "https://hooks.example.com/order"})
    for _ in range(9):
        server.gql(COMPLETE, {"id": claim(server, worker, "email"), "r": {"sent": True}}, worker)
    for _ in range(6):
        server.gql(
            COMPLETE, {"id": claim(server, worker, "thumbnail"), "r": {"bytes": 18234}}, worker
        )
    for _ in range(2):
        server.gql(
            FAIL, {"id": claim(server, worker, "webhook"), "e": "HTTP 410 Gone", "r": False}, worker
        )
    server.gql(HEARTBEAT, {"id": claim(server, worker, "email"), "p": {"step": "sending"}}, worker)
    featured = enqueue(server, shop, type="pdf", payload={"invoice": 999}, priority="HIGH")
    job = claim(server, worker, "pdf")
    assert job == featured
    server.gql(FAIL, {"id": job, "e": "renderer timed out after 30 s", "r": True}, worker)
    assert claim(server, worker, "pdf") == job  # retried at once (no backoff here)
    server.gql(HEARTBEAT, {"id": job, "p": {"pages": 12, "done": 12}}, worker)
    server.gql(COMPLETE, {"id": job, "r": {"url": "files/invoice-999.pdf", "pages": 12}}, worker)
    claim(server, worker, "pdf")
    server.gql(LIMITS, {"t": "pdf", "l": {"maxRunning": 4, "maxStartsPerSecond": 10}}, ADMIN_SECRET)
    server.gql(
        'mutation { pauseJobType(type: "webhook") { userErrors { code } } }', {}, ADMIN_SECRET
    )
    return job


async def shoot(server: LiveServer, job: str) -> None:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        await sign_in(page, server, ADMIN_SECRET)
        await expect(page.locator(".card")).to_have_count(len(TYPES))
        await expect(page.locator(".chart svg")).to_have_count(2)
        await page.screenshot(path=DOCS / "dashboard-overview.png", full_page=True)
        await page.goto(f"{origin(server)}/dashboard/jobs/{job}")
        await expect(page.locator(".timeline li")).to_have_count(5)
        await page.screenshot(path=DOCS / "dashboard-job.png", full_page=True)
        await browser.close()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/screenshots.db"
        with live_server(
            url, Path(tmp), job_types=",".join(TYPES), backoff_base_seconds=0
        ) as server:
            asyncio.run(shoot(server, seed(server)))
    print(f"wrote {DOCS / 'dashboard-overview.png'} and {DOCS / 'dashboard-job.png'}")


if __name__ == "__main__":
    main()
