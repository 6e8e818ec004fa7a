"""GraphiQL in a real headless Chromium, offline: the page loads only from queuelog, breaks
none of its CSP, renders, and runs an operation with an API key typed into its Headers tab."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.browser.cdp import Page, headless_page
from tests.support import ADMIN_SECRET, LiveServer, database_url

QUERY = "query WhoAmI { viewer { name } }"
# Runs before the page's own scripts; devtools-injected, so not itself subject to the CSP.
RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`);
});
"""
# GraphiQL 3 edits with CodeMirror 5: each editor's wrapper element holds its instance.
EDITOR = "document.querySelector('{} .CodeMirror')?.CodeMirror"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("browser")
    with database_url("sqlite", tmp) as url:
        server = LiveServer(url, tmp).start()
        try:
            yield server
        finally:
            server.stop()


async def run_in_graphiql(page: Page, live: LiveServer, query: str) -> str:
    """Open GraphiQL with `query` in its editor, paste the admin key into the Headers tab as
    graphiql.md tells a reader to, and press run. Returns the result editor's expression."""
    for domain in ("Page", "Runtime", "Log", "Network"):
        await page.send(f"{domain}.enable")
    await page.send("Page.addScriptToEvaluateOnNewDocument", source=RECORD_VIOLATIONS)
    # The page's share-URL convention puts the operation in the editor.
    await page.send("Page.navigate", url=f"{live.url}?q={quote(query)}")
    query_editor = EDITOR.format(".graphiql-query-editor")
    assert await page.wait_for(f"{query_editor}?.getValue()") == query
    # The schema arrived (introspection through the page's fetcher): the Docs show it.
    await page.evaluate(
        "document.querySelector('[aria-label=\"Show Documentation Explorer\"]').click()"
    )
    roots = "document.querySelector('.graphiql-doc-explorer-root-type')?.parentElement.innerText"
    assert "query: Query" in await page.wait_for(roots)
    await page.evaluate(
        "[...document.querySelectorAll('.graphiql-editor-tools button')]"
        ".find((b) => b.textContent.trim() === 'Headers').click()"
    )
    headers_editor = EDITOR.format(".graphiql-editor-tool .graphiql-editor:not(.hidden)")
    header = json.dumps({"Authorization": f"Bearer {ADMIN_SECRET}"})
    await page.wait_for(f"!!{headers_editor}")
    await page.evaluate(f"{headers_editor}.setValue({json.dumps(header)})")
    await page.evaluate("document.querySelector('.graphiql-execute-button').click()")
    return f"{EDITOR.format('.graphiql-response')}?.getValue()"


async def test_graphiql_runs_a_query_offline_under_its_csp(
    live: LiveServer, tmp_path: Path
) -> None:
    origin = f"http://127.0.0.1:{live.port}"
    async with headless_page(tmp_path / "profile") as page:
        result = await page.wait_for(await run_in_graphiql(page, live, QUERY))
        assert json.loads(result) == {"data": {"viewer": {"name": "admin"}}}

        shot = await page.send("Page.captureScreenshot", format="png")
        (tmp_path / "graphiql.png").write_bytes(base64.b64decode(shot["data"]))

        assert await page.evaluate("window.__violations") == []
        requested = [r["request"]["url"] for r in page.named("Network.requestWillBeSent")]
        assert requested and all(u.startswith((origin, "data:")) for u in requested), requested
        assert any("/graphiql/assets/graphiql@3.8.3/graphiql.min.js" in u for u in requested)
        failed = page.named("Network.loadingFailed")
        bad = [
            r["response"]["url"]
            for r in page.named("Network.responseReceived")
            if r["response"]["status"] >= 400
        ]
        assert not failed and not bad, (failed, bad)
        assert not page.named("Runtime.exceptionThrown")
        errors = [
            e["entry"]["text"]
            for e in page.named("Log.entryAdded")
            if e["entry"]["level"] == "error"
        ]
        errors += [
            str(c["args"])
            for c in page.named("Runtime.consoleAPICalled")
            if c["type"] in ("error", "assert")
        ]
        assert not errors, errors


async def test_graphiql_runs_a_subscription_with_the_key_from_its_headers_tab(
    live: LiveServer, tmp_path: Path
) -> None:
    """graphiql.md says the Headers tab authenticates subscriptions too (GraphiQL sends it
    as the connection_init payload): an event appears in the result pane."""
    subscription = 'subscription Watch { jobStatusChanged(type: "email") { status } }'
    async with headless_page(tmp_path / "profile") as page:
        result = await run_in_graphiql(page, live, subscription)
        for _ in range(100):  # GraphiQL opens its WebSocket
            if page.named("Network.webSocketCreated"):
                break
            await asyncio.sleep(0.1)
        sockets = [s["url"] for s in page.named("Network.webSocketCreated")]
        assert sockets == [live.ws_url], sockets
        await asyncio.sleep(0.5)  # the subscription is live once connection_ack arrived
        live.gql('mutation { enqueueJob(input: {type: "email"}) { job { id } } }', key=ADMIN_SECRET)
        shown = await page.wait_for(f"({result} || '').includes('PENDING') && {result}")
        assert json.loads(shown) == {"data": {"jobStatusChanged": {"status": "PENDING"}}}
        assert await page.evaluate("window.__violations") == []
