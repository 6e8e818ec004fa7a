"""GraphiQL in a real headless Chromium, offline: the page is queuelog's, loads only from
queuelog, breaks none of its CSP, runs its opening document, runs an operation with an API
key typed into its Headers tab without keeping that key past the tab, and a frontend on
another allowed origin can call the API."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.async_api import Page

from tests.browser.conftest import Watched
from tests.support import ADMIN_SECRET, LiveServer, free_port, session_server

QUERY = "query WhoAmI { viewer { name } }"
# GraphiQL 3 edits with CodeMirror 5: each editor's wrapper element holds its instance.
EDITOR = "document.querySelector('{} .CodeMirror')?.CodeMirror"
QUERY_EDITOR = EDITOR.format(".graphiql-query-editor")
HEADERS_EDITOR = EDITOR.format(".graphiql-editor-tool .graphiql-editor:not(.hidden)")
RESULT = f"{EDITOR.format('.graphiql-response')}?.getValue()"
PORT = free_port()
FRONTEND = f"http://localhost:{PORT}"  # another origin of the same loopback server


@pytest.fixture(scope="module")
def graphiql_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from session_server(
        tmp_path_factory, "sqlite", "browser", port=PORT, allowed_origins=FRONTEND
    )


async def value(page: Page, expression: str) -> str:
    """`expression` once it is truthy (a string), as Playwright polls it."""
    handle = await page.wait_for_function(f"() => {expression}", timeout=30_000)
    return str(await handle.json_value())


async def open_graphiql(page: Page, server: LiveServer, query: str | None = None) -> None:
    """Open GraphiQL (with `query` in its editor by the page's share-URL convention) and
    wait for the schema: introspection went through the page's fetcher."""
    await page.goto(server.url if query is None else f"{server.url}?q={quote(query)}")
    await value(page, f"{QUERY_EDITOR}?.getValue()")
    await page.get_by_label("Show Documentation Explorer").click()
    roots = "document.querySelector('.graphiql-doc-explorer-root-type')?.parentElement.innerText"
    assert "query: Query" in await value(page, roots)


async def type_key_and_run(page: Page) -> None:
    """Paste the admin key into the Headers tab as graphiql.md says, and press run."""
    await page.locator(".graphiql-editor-tools button", has_text="Headers").click()
    await value(page, f"!!{HEADERS_EDITOR}")
    header = json.dumps({"Authorization": f"Bearer {ADMIN_SECRET}"})
    await page.evaluate(f"{HEADERS_EDITOR}.setValue({json.dumps(header)})")
    await page.locator(".graphiql-execute-button").click()


async def test_graphiql_runs_a_query_offline_under_its_csp(
    watched: Watched, graphiql_server: LiveServer, tmp_path: Path
) -> None:
    page = watched.page
    await open_graphiql(page, graphiql_server, QUERY)
    await type_key_and_run(page)
    assert json.loads(await value(page, RESULT)) == {"data": {"viewer": {"name": "admin"}}}
    await page.screenshot(path=tmp_path / "graphiql.png")

    assert await watched.violations() == []
    origin = f"http://127.0.0.1:{graphiql_server.port}"
    requested = watched.requested
    assert requested and all(u.startswith((origin, "data:")) for u in requested), requested
    assert any("/graphiql/assets/graphiql@3.8.3/graphiql.min.js" in u for u in requested)
    assert not watched.failed and not watched.bad_status, (watched.failed, watched.bad_status)
    assert not watched.errors, watched.errors


async def test_the_page_is_queuelogs_and_its_opening_document_runs(
    watched: Watched, graphiql_server: LiveServer
) -> None:
    page = watched.page
    await open_graphiql(page, graphiql_server)
    assert "queuelog" in await page.title() and "Strawberry" not in await page.title()
    opening = await value(page, f"{QUERY_EDITOR}?.getValue()")
    assert '{"Authorization": "Bearer <your api key>"}' in opening and "Headers tab" in opening
    await page.locator(".graphiql-execute-button").click()
    assert json.loads(await value(page, RESULT)) == {"data": {"__typename": "Query"}}
    assert await watched.violations() == [] and not watched.errors


async def test_a_key_typed_in_the_headers_tab_does_not_outlive_the_tab(
    watched: Watched, graphiql_server: LiveServer
) -> None:
    page = watched.page
    await open_graphiql(page, graphiql_server, QUERY)
    await type_key_and_run(page)
    assert json.loads(await value(page, RESULT)) == {"data": {"viewer": {"name": "admin"}}}
    stored = await page.evaluate("JSON.stringify({...localStorage})")
    assert "graphiql" in stored and ADMIN_SECRET not in stored  # GraphiQL saved its tabs
    assert ADMIN_SECRET not in page.url

    # A new tab of the same browser profile opens without the key.
    again = await page.context.new_page()
    await open_graphiql(again, graphiql_server, QUERY)
    await again.locator(".graphiql-editor-tools button", has_text="Headers").click()
    assert ADMIN_SECRET not in (await again.evaluate(f"{HEADERS_EDITOR}?.getValue()") or "")
    assert ADMIN_SECRET not in await again.evaluate("JSON.stringify({...localStorage})")


async def test_graphiql_runs_a_subscription_with_the_key_from_its_headers_tab(
    watched: Watched, graphiql_server: LiveServer
) -> None:
    """graphiql.md says the Headers tab authenticates subscriptions too (GraphiQL sends it
    as the connection_init payload): an event appears in the result pane."""
    subscription = 'subscription Watch { jobStatusChanged(type: "email") { status } }'
    page = watched.page
    await open_graphiql(page, graphiql_server, subscription)
    await type_key_and_run(page)
    for _ in range(100):  # GraphiQL opens its WebSocket
        if watched.sockets:
            break
        await asyncio.sleep(0.1)
    assert watched.sockets == [graphiql_server.ws_url], watched.sockets
    await asyncio.sleep(0.5)  # the subscription is live once connection_ack arrived
    graphiql_server.gql(
        'mutation { enqueueJob(input: {type: "email"}) { job { id } } }', key=ADMIN_SECRET
    )
    shown = await value(page, f"({RESULT} || '').includes('PENDING') && {RESULT}")
    assert json.loads(shown) == {"data": {"jobStatusChanged": {"status": "PENDING"}}}
    assert await watched.violations() == []


async def test_a_frontend_on_an_allowed_origin_calls_the_api(
    watched: Watched, graphiql_server: LiveServer
) -> None:
    """A page on another origin `fetch`es with a bearer key: the browser's preflight passes
    and it reads the answer (QUEUELOG_ALLOWED_ORIGINS)."""
    page = watched.page
    # The frontend's own page, served by the browser itself (queuelog's pages forbid
    # connections elsewhere by their CSP); its fetch goes to the real server.
    html = "<!doctype html><title>frontend</title>"
    await page.route(
        f"{FRONTEND}/app", lambda route: route.fulfill(body=html, content_type="text/html")
    )
    await page.goto(f"{FRONTEND}/app")
    call = """async ([url, key]) => {
        const r = await fetch(url, {
            method: "POST",
            headers: {"Content-Type": "application/json", "Authorization": "Bearer " + key},
            body: JSON.stringify({query: "{ viewer { name } }"}),
        });
        return [r.status, await r.json(), r.headers.get("x-request-id")];
    }"""
    try:
        status, body, request_id = await page.evaluate(call, [graphiql_server.url, ADMIN_SECRET])
    except Exception:
        raise AssertionError((watched.errors, watched.failed, watched.requested)) from None
    assert (status, body) == (200, {"data": {"viewer": {"name": "admin"}}})
    assert request_id  # exposed to the frontend
