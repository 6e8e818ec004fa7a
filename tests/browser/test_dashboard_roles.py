"""The dashboard follows the key's role: a producer sees only its own jobs and may cancel
them, a viewer sees everything and is offered no action; the page works from the keyboard
and fits a 375 px wide screen."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.async_api import Page, expect

from tests.browser.conftest import Watched
from tests.browser.dashboard_support import (
    CLAIM,
    FAIL,
    assert_clean,
    dashboard_server,
    enqueue,
    origin,
    sign_in,
)
from tests.support import ADMIN_SECRET, LiveServer

ROWS = "table.jobs tbody tr"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from dashboard_server(tmp_path_factory, "dashboard-roles")


async def test_a_producer_sees_only_its_jobs_and_may_cancel_them(
    watched: Watched, server: LiveServer
) -> None:
    page = watched.page
    name = server.unique_name("shop")
    producer = server.create_key("PRODUCER", ["upload"], name=name)
    own = enqueue(server, producer, type="upload", payload={"own": True})
    enqueue(server, ADMIN_SECRET, type="upload", payload={"own": False})

    await sign_in(page, server, producer)
    await expect(page.locator(".card[data-type='upload']")).to_be_visible()
    assert await page.locator(".card button").count() == 0  # no pause for a producer
    await expect(page.get_by_role("link", name="API keys")).to_have_count(0)

    await page.get_by_role("link", name="Jobs").click()
    await page.get_by_label("Type").fill("upload")
    await page.get_by_role("button", name="Apply filter").click()
    await expect(page.locator(ROWS)).to_have_count(1)
    await expect(page.locator(ROWS).first).to_have_attribute("data-id", own)
    await expect(page.get_by_label("Producer")).to_have_count(0)
    await expect(page.get_by_role("button", name="Cancel all matching…")).to_be_visible()
    await expect(page.get_by_role("button", name="Retry all matching…")).to_have_count(0)

    await page.get_by_role("link", name=f"#{own}").click()
    await page.get_by_role("button", name="Cancel job").click()
    await page.get_by_role("dialog").get_by_role("button", name="Cancel job").click()
    await expect(page.locator(".job-head .badge")).to_have_text("CANCELLED")
    await expect(page.get_by_role("button", name="Retry job")).to_have_count(0)
    await assert_clean(watched)


async def test_a_viewer_sees_everything_and_changes_nothing(
    watched: Watched, server: LiveServer
) -> None:
    page = watched.page
    viewer = server.create_key("VIEWER")
    worker = server.create_key("WORKER", ["resize"])
    producer = server.create_key("PRODUCER", ["resize"])
    enqueue(server, producer, type="resize")
    enqueue(server, ADMIN_SECRET, type="resize")
    failed = server.gql(CLAIM, {"types": ["resize"]}, worker)["claimJob"]["job"]["id"]
    server.gql(FAIL, {"id": failed, "error": "disk full"}, worker)

    await sign_in(page, server, viewer, "/dashboard/jobs?type=resize")
    await expect(page.locator(ROWS)).to_have_count(2)
    assert await page.locator(".bulk button").count() == 0
    await page.get_by_role("link", name=f"#{failed}").click()
    await expect(page.locator("pre.error-text")).to_have_text("disk full")
    assert await page.locator(".job-head button").count() == 0

    await page.get_by_role("link", name="Overview").click()
    await expect(page.locator(".card[data-type='resize']")).to_be_visible()
    assert await page.locator(".card button").count() == 0
    await expect(page.get_by_role("link", name="API keys")).to_have_count(0)
    await page.goto(origin(server) + "/dashboard/keys")
    await expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    await assert_clean(watched)


async def test_the_keyboard_alone_signs_in_and_moves_around(
    watched: Watched, server: LiveServer
) -> None:
    page = watched.page
    await page.goto(origin(server) + "/dashboard")
    await expect(page.get_by_label("API key")).to_be_focused()
    await page.keyboard.type(ADMIN_SECRET)
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    for _ in range(10):
        await page.keyboard.press("Tab")
        if await page.evaluate("document.activeElement.textContent") == "Jobs":
            break
    outline = await page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"  # focus is visible
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    await assert_clean(watched)


async def _fits(page: Page) -> None:
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= 375, width


async def test_a_375_px_screen_shows_every_page_without_overflow(
    watched: Watched, server: LiveServer
) -> None:
    page = watched.page
    await page.set_viewport_size({"width": 375, "height": 800})
    job = enqueue(server, ADMIN_SECRET, type="sync", payload={"long": "x" * 300})
    await sign_in(page, server, ADMIN_SECRET)
    await expect(page.locator(".card").first).to_be_visible()
    await expect(page.locator(".chart svg").first).to_be_visible()
    await _fits(page)
    await page.get_by_role("link", name="Jobs").click()
    await expect(page.locator(ROWS).first).to_be_visible()
    await _fits(page)
    await page.get_by_role("link", name=f"#{job}").click()
    await expect(page.locator("pre.json").first).to_be_visible()
    await _fits(page)
    await page.get_by_role("link", name="API keys").click()
    await expect(page.locator("table.keys")).to_be_visible()
    await _fits(page)
    await assert_clean(watched)


async def test_a_refused_key_is_said_so_and_not_kept(watched: Watched, server: LiveServer) -> None:
    page = watched.page
    await page.goto(origin(server) + "/dashboard/jobs")
    await page.get_by_label("API key").fill("qlk_not_a_real_key")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("alert")).to_contain_text("That key was not accepted")
    await expect(page.get_by_role("alert")).to_contain_text("(UNAUTHENTICATED)")
    assert await page.evaluate("sessionStorage.length") == 0
    await assert_clean(watched)


async def test_a_key_pasted_as_its_header_value_signs_in(
    watched: Watched, server: LiveServer
) -> None:
    """ "Bearer qlk_…", as copied from a curl command, is the key."""
    viewer = server.create_key("VIEWER")
    await sign_in(watched.page, server, f"  Bearer {viewer} ")
    stored = await watched.page.evaluate("Object.values(sessionStorage)")
    assert stored == [viewer]
    await assert_clean(watched)


async def test_a_key_revoked_while_signed_in_signs_the_page_out(
    watched: Watched, server: LiveServer
) -> None:
    page = watched.page
    name = server.unique_name("oncall")
    viewer = server.create_key("VIEWER", name=name)
    await sign_in(page, server, viewer)
    await expect(page.locator(".live[data-state='live']")).to_be_visible()
    assert server.gql(
        "mutation($n: String!) { revokeApiKey(name: $n) }", {"n": name}, ADMIN_SECRET
    )["revokeApiKey"]
    await expect(page.get_by_role("alert")).to_contain_text("Signed out")
    await expect(page.get_by_label("API key")).to_be_visible()
    assert await page.evaluate("sessionStorage.length") == 0
    await assert_clean(watched)
