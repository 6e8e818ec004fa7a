"""queuelog's GraphiQL page (`queuelog/static/graphiql.html`: its title, an opening document
that says where the key goes, and headers kept for the tab only), working offline: every
script and stylesheet it names on the unpkg CDN is served by queuelog itself from
`queuelog/static/graphiql/` (vendored from the npm registry by `scripts/vendor-graphiql.sh`,
under the same `<package>@<version>/<file>` paths, so the page's integrity hashes hold)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from starlette.responses import Response
from starlette.staticfiles import PathLike, StaticFiles
from starlette.types import Scope

CDN = "https://unpkg.com/"
ASSETS_PATH = "/graphiql/assets"
ASSETS_DIR = Path(__file__).parents[1] / "static" / "graphiql"
PAGE = Path(__file__).parents[1] / "static" / "graphiql.html"
_LOADED = re.compile(r'<(?:script|link)\b[^>]*?\b(?:src|href)="([^"]+)"')


def page() -> str:
    """The GraphiQL page as served: queuelog's, loading only files queuelog ships."""
    return offline_page(PAGE.read_text())


def offline_page(html: str) -> str:
    """`html` with its CDN URLs pointing at ASSETS_PATH; refuses a page that would load a
    file queuelog does not ship, or anything from another origin."""
    page = html.replace(CDN, ASSETS_PATH + "/")
    prefix = ASSETS_PATH + "/"
    unshipped = [
        url
        for url in _LOADED.findall(page)
        if not url.startswith("data:")
        and not (url.startswith(prefix) and (ASSETS_DIR / url.removeprefix(prefix)).is_file())
    ]
    if unshipped:
        raise RuntimeError(
            f"the GraphiQL page loads files queuelog does not ship ({', '.join(unshipped)}): "
            "run scripts/vendor-graphiql.sh at the versions the page names"
        )
    return page


class GraphiQLAssets(StaticFiles):
    """The vendored files. Their paths name their versions, so browsers may keep them."""

    def __init__(self) -> None:
        super().__init__(directory=ASSETS_DIR)

    def file_response(
        self,
        full_path: PathLike,
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["cache-control"] = "public, max-age=31536000, immutable"
        return response
