"""The overview: each job type's card counts follow other clients' changes live (from the
subscription, with no request of its own), on SQLite and PostgreSQL; the throughput charts
count them too; pausing a type from its card stops workers' claims until it resumes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.async_api import Locator, Page, expect

from tests.browser.conftest import Watched
from tests.browser.dashboard_support import (
    CLAIM,
    TYPES,
    assert_clean,
    dashboard_server,
    enqueue,
    live,
    sign_in,
)
from tests.support import ADMIN_SECRET, LiveServer, live_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from dashboard_server(tmp_path_factory, "dashboard-overview")


def count(page: Page, job_type: str, status: str) -> Locator:
    return page.locator(f".card[data-type='{job_type}'] dd[data-status='{status}']")


def api_calls(watched: Watched) -> int:
    return sum(url.endswith("/graphql") for url in watched.requested)


async def test_card_counts_follow_other_clients_live(
    watched: Watched, start_server: Callable[..., LiveServer]
) -> None:
    server = start_server(job_types=",".join(TYPES))
    page = watched.page
    enqueue(server, ADMIN_SECRET, type="email")
    await sign_in(page, server, ADMIN_SECRET)
    await expect(count(page, "email", "PENDING")).to_have_text("1")
    await expect(page.locator(".chart").first.locator(".legend-enqueued strong")).to_have_text("1")
    await live(page)
    # An event of another type shows the subscription is live before the counts are watched.
    enqueue(server, ADMIN_SECRET, type="pdf")
    await expect(count(page, "pdf", "PENDING")).to_have_text("1")
    calls = api_calls(watched)

    enqueue(server, ADMIN_SECRET, type="email")
    enqueue(server, ADMIN_SECRET, type="email")
    await expect(count(page, "email", "PENDING")).to_have_text("3")
    server.gql(CLAIM, {"types": ["email"]}, ADMIN_SECRET)
    await expect(count(page, "email", "PENDING")).to_have_text("2")
    await expect(count(page, "email", "RUNNING")).to_have_text("1")
    await expect(count(page, "pdf", "PENDING")).to_have_text("1")
    hour = page.locator(".chart").first
    await expect(hour.locator(".legend-enqueued strong")).to_have_text("4")
    await expect(hour.locator(".legend-started strong")).to_have_text("1")
    await expect(page.locator(".card[data-type='email'] .oldest")).to_contain_text("Oldest pending")
    assert api_calls(watched) == calls  # no polling, no reload: the subscription did it all
    await assert_clean(watched)


async def test_pausing_a_type_stops_claims_until_it_resumes(
    watched: Watched, server: LiveServer
) -> None:
    page = watched.page
    worker = server.create_key("WORKER", ["report"])
    await sign_in(page, server, ADMIN_SECRET)
    await page.get_by_role("button", name="Pause report").click()
    card = page.locator(".card[data-type='report']")
    await expect(card.locator(".paused-badge")).to_have_text("paused")
    job = enqueue(server, ADMIN_SECRET, type="report")
    assert server.gql(CLAIM, {"types": ["report"]}, worker)["claimJob"]["job"] is None

    await page.get_by_role("button", name="Resume report").click()
    await expect(card.locator(".paused-badge")).to_have_count(0)
    assert server.gql(CLAIM, {"types": ["report"]}, worker)["claimJob"]["job"] == {"id": job}
    await assert_clean(watched)


async def test_the_charts_show_one_type(watched: Watched, server: LiveServer) -> None:
    page = watched.page
    for _ in range(2):
        enqueue(server, ADMIN_SECRET, type="upload")
    enqueue(server, ADMIN_SECRET, type="sync")
    await sign_in(page, server, ADMIN_SECRET)
    await page.get_by_label("Types shown").select_option("upload")
    for chart in await page.locator(".chart").all():
        await expect(chart.locator(".legend-enqueued strong")).to_have_text("2")
    assert await page.locator(".chart svg polyline").count() == 10
    await assert_clean(watched)


async def test_after_a_dropped_connection_the_page_reads_what_it_missed(
    watched: Watched, tmp_path: Path
) -> None:
    """The server restarts; meanwhile another replica on the same database enqueues. The
    page reconnects by itself and reads the counts again."""
    page = watched.page
    url = f"sqlite:///{tmp_path}/restart.db"
    with live_server(url, tmp_path, job_types=",".join(TYPES)) as server:
        await sign_in(page, server, ADMIN_SECRET)
        await expect(count(page, "email", "PENDING")).to_have_text("0")
        await live(page)
        server.stop()
        await expect(page.locator(".live")).not_to_have_attribute("data-state", "live")
        with server.sibling() as other:
            enqueue(other, ADMIN_SECRET, type="email")
            enqueue(other, ADMIN_SECRET, type="email")
        server.start()
        await expect(page.locator(".live")).to_have_attribute("data-state", "live", timeout=30_000)
        await expect(count(page, "email", "PENDING")).to_have_text("2")
    # Chromium reports each refused reconnection attempt on the console; nothing else.
    watched.errors[:] = [e for e in watched.errors if "WebSocket connection to" not in e]
    await assert_clean(watched)
