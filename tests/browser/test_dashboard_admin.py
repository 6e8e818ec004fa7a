"""The dashboard in headless Chromium, signed in as an admin: the jobs list filtered and
paginated with the filter in the URL, a job page that escapes its payload and follows the
job live, retrying a job, bulk-cancelling what a filter matches, the API keys page, and
signing out. Every test ends with no console error and no CSP violation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.async_api import WebSocket, expect

from tests.browser.conftest import Watched
from tests.browser.dashboard_support import (
    CLAIM,
    FAIL,
    assert_clean,
    dashboard_server,
    enqueue,
    live,
    origin,
    sign_in,
)
from tests.support import ADMIN_SECRET, LiveServer

HEARTBEAT = """mutation($id: ID!, $progress: JSON) {
  heartbeatJob(id: $id, progress: $progress) { userErrors { code } }
}"""
COMPLETE = "mutation($id: ID!) { completeJob(id: $id) { userErrors { code } } }"
HOSTILE = "<img src=x onerror=window.__pwned=1>"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from dashboard_server(tmp_path_factory, "dashboard-admin")


async def test_filter_open_a_failed_job_and_retry_it(watched: Watched, server: LiveServer) -> None:
    page = watched.page
    worker = server.create_key("WORKER", ["pdf"])
    enqueue(server, ADMIN_SECRET, type="pdf", payload={"html": HOSTILE})
    claimed = server.gql(CLAIM, {"types": ["pdf"]}, worker)["claimJob"]["job"]["id"]
    failed = server.gql(FAIL, {"id": claimed, "error": f"boom {HOSTILE}"}, worker)["failJob"]
    assert failed["job"]["status"] == "FAILED"

    await sign_in(page, server, ADMIN_SECRET)
    await page.get_by_role("link", name="Jobs").click()
    await page.get_by_label("failed").check()
    await page.get_by_label("Type").fill("pdf")
    await page.get_by_role("button", name="Apply filter").click()
    await expect(page.locator("table.jobs tbody tr")).to_have_count(1)
    query = parse_qs(urlsplit(page.url).query)
    assert query == {"status": ["FAILED"], "type": ["pdf"]}
    assert ADMIN_SECRET not in page.url

    # The URL is shareable: opened afresh (same tab session), it shows the same filter.
    await page.goto(page.url)
    await expect(page.locator("table.jobs tbody tr")).to_have_count(1)
    assert await page.get_by_label("failed").is_checked()

    await page.get_by_role("link", name=f"#{claimed}").click()
    await expect(page.get_by_role("heading", name=f"Job #{claimed}")).to_be_visible()
    await expect(page.locator("pre.error-text")).to_have_text(f"boom {HOSTILE}")
    assert HOSTILE in await page.locator("pre.json").first.inner_text()
    assert await page.evaluate("window.__pwned") is None
    assert await page.locator("main img").count() == 0
    await expect(page.locator(".timeline li")).to_have_count(3)  # created, running, failed

    await page.get_by_role("button", name="Retry job").click()
    dialog = page.get_by_role("dialog")
    await expect(dialog).to_contain_text(f"Put job #{claimed} (pdf) back to pending?")
    await dialog.get_by_role("button", name="Retry job").click()
    await expect(page.locator(".job-head .badge")).to_have_text("PENDING")
    await expect(page.locator(".timeline li").last).to_have_attribute("data-status", "PENDING")
    job = server.gql("query($id: ID!) { job(id: $id) { status } }", {"id": claimed}, ADMIN_SECRET)
    assert job["job"]["status"] == "PENDING"

    # Live: a worker claims it while the page is open; the page follows without reloading.
    server.gql(CLAIM, {"types": ["pdf"]}, worker)
    await expect(page.locator(".job-head .badge")).to_have_text("RUNNING")
    await assert_clean(watched)


async def test_a_running_job_shows_its_progress_live(watched: Watched, server: LiveServer) -> None:
    page = watched.page
    worker = server.create_key("WORKER", ["upload"])
    job = enqueue(server, ADMIN_SECRET, type="upload", payload={"file": "a.csv"})
    assert server.gql(CLAIM, {"types": ["upload"]}, worker)["claimJob"]["job"]["id"] == job
    await sign_in(page, server, ADMIN_SECRET, f"/dashboard/jobs/{job}")
    await expect(page.locator(".job-head .badge")).to_have_text("RUNNING")
    await expect(page.locator(".progress-box")).to_contain_text("No progress reported.")
    await live(page)
    server.gql(HEARTBEAT, {"id": job, "progress": {"rows": 500}}, worker)
    await expect(page.locator(".progress-box pre")).to_contain_text('"rows": 500')
    server.gql(COMPLETE, {"id": job}, worker)
    await expect(page.locator(".job-head .badge")).to_have_text("COMPLETED")
    await expect(page.locator(".progress-box pre")).to_contain_text('"rows": 500')
    await assert_clean(watched)


async def test_the_list_pages_by_cursor(watched: Watched, server: LiveServer) -> None:
    page = watched.page
    for n in range(30):
        enqueue(server, ADMIN_SECRET, type="digest", payload={"n": n})
    await sign_in(page, server, ADMIN_SECRET, "/dashboard/jobs?type=digest")
    await expect(page.locator(".summary")).to_have_text("30 jobs match")
    await expect(page.locator("table.jobs tbody tr")).to_have_count(25)
    first_page = await page.locator("table.jobs tbody tr").first.get_attribute("data-id")
    await page.get_by_role("button", name="Next page").click()
    await expect(page.locator("table.jobs tbody tr")).to_have_count(5)
    await page.get_by_role("button", name="Previous page").click()
    first_row = page.locator("table.jobs tbody tr").first
    await expect(first_row).to_have_attribute("data-id", first_page or "")
    await assert_clean(watched)


async def test_bulk_cancel_of_a_filter_states_the_count(
    watched: Watched, server: LiveServer
) -> None:
    page = watched.page
    batch = server.unique_name("batch")
    for n in range(3):
        enqueue(server, ADMIN_SECRET, type="export", payload={"batch": batch, "n": n})
    enqueue(server, ADMIN_SECRET, type="export", payload={"batch": "other"})
    await sign_in(page, server, ADMIN_SECRET, "/dashboard/jobs")
    await page.get_by_label("Payload contains (JSON)").fill(json.dumps({"batch": batch}))
    await page.get_by_role("button", name="Apply filter").click()
    await expect(page.locator(".summary")).to_have_text("3 jobs match")
    await page.get_by_role("button", name="Cancel all matching…").click()
    dialog = page.get_by_role("dialog")
    await expect(dialog).to_contain_text("Cancel 3 pending or running jobs matching this filter?")
    await dialog.get_by_role("button", name="Cancel 3 jobs").click()
    await expect(page.locator(".message.notice")).to_contain_text("Cancelled 3 jobs.")
    statuses = server.gql(
        '{ jobs(type: "export") { nodes { status payload } } }', key=ADMIN_SECRET
    )["jobs"]["nodes"]
    assert sorted((j["payload"]["batch"], j["status"]) for j in statuses) == sorted(
        [(batch, "CANCELLED")] * 3 + [("other", "PENDING")]
    )

    # Bad input is refused on the page, and nothing changes.
    await page.get_by_label("Payload contains (JSON)").fill("{not json")
    await page.get_by_role("button", name="Apply filter").click()
    await expect(page.locator(".message.error")).to_contain_text("not valid JSON")
    await assert_clean(watched)


async def test_api_keys_created_shown_once_and_revoked(
    watched: Watched, server: LiveServer
) -> None:
    page = watched.page
    name = server.unique_name("dash-viewer")
    await sign_in(page, server, ADMIN_SECRET)
    await page.get_by_role("link", name="API keys").click()
    await page.get_by_label("Name").fill(name)
    await page.get_by_label("Role").select_option("VIEWER")
    await page.get_by_role("button", name="Create key").click()
    secret = await page.locator("#new-secret").inner_text()
    who = server.gql("{ viewer { name role } }", key=secret)["viewer"]
    assert who == {"name": name, "role": "VIEWER"}
    await page.get_by_role("button", name="Done").click()
    await expect(page.locator("#new-secret")).to_have_count(0)

    # The same name again: the API's refusal, in plain words.
    await page.get_by_label("Name").fill(name)
    await page.get_by_role("button", name="Create key").click()
    await expect(page.locator(".message.error")).to_contain_text("NAME_TAKEN")

    await page.get_by_role("button", name=f"Revoke {name}").click()
    await page.get_by_role("dialog").get_by_role("button", name="Revoke").click()
    await expect(page.locator(f"tr[data-name='{name}'] td").nth(5)).to_contain_text("revoked")
    assert (
        server.post("{ viewer { name } }", key=secret).json()["errors"][0]["extensions"]["code"]
        == "UNAUTHENTICATED"
    )
    await assert_clean(watched)


async def test_sign_out_forgets_the_key_and_closes_the_socket(
    watched: Watched, server: LiveServer
) -> None:
    page = watched.page
    sockets: list[WebSocket] = []
    page.on("websocket", lambda ws: sockets.append(ws))
    await sign_in(page, server, ADMIN_SECRET)
    await live(page)
    assert await page.evaluate("Object.values(sessionStorage)") == [ADMIN_SECRET]
    assert ADMIN_SECRET not in await page.evaluate("JSON.stringify({...localStorage})")
    await page.reload()  # the key lasts as long as the tab
    await expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    await live(page)
    socket = sockets[-1]
    assert not socket.is_closed()

    await page.get_by_role("button", name="Sign out").click()
    await expect(page.get_by_label("API key")).to_be_visible()
    assert await page.evaluate("sessionStorage.length") == 0
    if not socket.is_closed():
        await socket.wait_for_event("close")
    assert origin(server) in page.url
    await assert_clean(watched)
