"""The operations dashboard at /dashboard: one HTML page and its ES modules and stylesheet,
shipped in `queuelog/static/dashboard/`, served by queuelog itself under a strict CSP. The
page uses nothing but the public GraphQL API, with the API key the user signs in with."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

PATH = "/dashboard"
ASSETS_DIR = Path(__file__).parents[1] / "static" / "dashboard"
# Scripts, styles and connections (HTTP and the same-origin WebSocket, which CSP Level 3's
# 'self' covers) from this origin only: the page has no inline code at all.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)


def _page(request: Request) -> Response:
    """The page for /dashboard and every client-side route below it."""
    return Response((ASSETS_DIR / "index.html").read_bytes(), media_type="text/html")


def routes() -> list[BaseRoute]:
    """The page and its assets; assets first, so that their paths are never the page."""
    return [
        Mount(f"{PATH}/assets", StaticFiles(directory=ASSETS_DIR / "assets")),
        Route(PATH, _page),
        Route(PATH + "/{route:path}", _page),
    ]
