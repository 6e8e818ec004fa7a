"""Headless Debian Chromium driven over the Chrome DevTools Protocol (its WebSocket), with
nothing but `websockets` and `httpx`: one page, its commands, and every event it sends."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import websockets

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",  # the port chosen is written to DevToolsActivePort
    "--window-size=1280,800",
)


class CDPError(AssertionError):
    pass


class Page:
    """One browser tab: `send` a command and get its result; `events` holds every event."""

    def __init__(self, ws: websockets.ClientConnection) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}

    async def read(self) -> None:
        async for raw in self.ws:
            message = json.loads(raw)
            future = self._pending.pop(message.get("id", -1), None)
            if future is None:
                self.events.append(message)
            elif "error" in message:
                future.set_exception(CDPError(message["error"]))
            else:
                future.set_result(message.get("result", {}))

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self._ids)
        future = self._pending[ident] = asyncio.get_running_loop().create_future()
        await self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        return await asyncio.wait_for(future, 30)

    async def evaluate(self, expression: str) -> Any:
        """The JSON value of `expression` in the page (awaited when it is a promise)."""
        reply = await self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in reply:
            raise CDPError(f"{expression}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    async def wait_for(self, expression: str) -> Any:
        """The first truthy value of `expression`, polled for up to ten seconds."""
        for _ in range(100):
            if value := await self.evaluate(expression):
                return value
            await asyncio.sleep(0.1)
        raise CDPError(f"still false after ten seconds: {expression}")

    def named(self, *methods: str) -> list[dict[str, Any]]:
        return [e["params"] for e in self.events if e["method"] in methods]


@contextlib.asynccontextmanager
async def headless_page(profile: Path) -> AsyncIterator[Page]:
    """A fresh headless Chromium (profile in `profile`) and its one blank page."""
    try:
        proc = await asyncio.create_subprocess_exec(
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={profile}",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise AssertionError(f"{CHROMIUM} is missing: run scripts/ensure-chromium.sh") from None
    try:
        port_file = profile / "DevToolsActivePort"
        async with asyncio.timeout(15):
            while not port_file.exists() or not port_file.read_text().strip():
                if proc.returncode is not None:
                    raise AssertionError(f"chromium exited with {proc.returncode}")
                await asyncio.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        async with httpx.AsyncClient() as client:
            targets = (await client.get(f"http://127.0.0.1:{port}/json/list")).json()
        url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
        async with websockets.connect(url, max_size=None) as ws:
            page = Page(ws)
            reader = asyncio.create_task(page.read())
            try:
                yield page
            finally:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError, websockets.ConnectionClosed):
                    await reader
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()
