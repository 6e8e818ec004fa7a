"""The dashboard over plain HTTP: the page at /dashboard and every client-side route below
it, under its strict CSP; its assets, shipped in the package; QUEUELOG_DASHBOARD=false
turns it off."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from queuelog.edge.dashboard import ASSETS_DIR
from tests.support import LiveServer

ASSETS = sorted(p.name for p in (ASSETS_DIR / "assets").iterdir())


def test_the_page_and_its_routes_are_served_under_a_strict_csp(
    start_server: Callable[..., LiveServer],
) -> None:
    server = start_server()
    base = f"http://127.0.0.1:{server.port}"
    for path in ("/dashboard", "/dashboard/", "/dashboard/jobs", "/dashboard/jobs/123"):
        page = httpx.get(base + path + "?status=FAILED")
        assert page.status_code == 200, path
        assert page.headers["content-type"].startswith("text/html")
        assert '<script type="module" src="/dashboard/assets/app.js">' in page.text
        policy = page.headers["content-security-policy"]
        csp = dict(d.strip().split(" ", 1) for d in policy.split(";"))
        assert csp["script-src"] == "'self'" and csp["style-src"] == "'self'"
        assert csp["connect-src"] == "'self'" and csp["default-src"] == "'none'"
        assert csp["frame-ancestors"] == "'none'"
    # Every page holds no inline script or style for the CSP to refuse.
    html = (ASSETS_DIR / "index.html").read_text()
    assert "<style" not in html and "style=" not in html and "<script>" not in html

    for name in ASSETS:
        asset = httpx.get(f"{base}/dashboard/assets/{name}")
        assert asset.status_code == 200
        assert asset.content == (ASSETS_DIR / "assets" / name).read_bytes()
    assert {"app.js", "api.js", "dashboard.css"} <= set(ASSETS)
    assert (
        httpx.get(f"{base}/dashboard/assets/app.js")
        .headers["content-type"]
        .startswith("text/javascript")
    )
    assert httpx.get(f"{base}/dashboard/assets/missing.js").status_code == 404
    # The API's own answers keep the API's CSP.
    assert "script-src" not in httpx.get(f"{base}/healthz").headers["content-security-policy"]


def test_no_script_builds_html_from_strings() -> None:
    """Data from the API is attacker-controlled: the page renders it as text only."""
    for path in (ASSETS_DIR / "assets").glob("*.js"):
        source = path.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in source, (path.name, sink)
        assert len(source.splitlines()) < 400, path.name


def test_queuelog_dashboard_false_turns_it_off(start_server: Callable[..., LiveServer]) -> None:
    server = start_server(dashboard=False)
    base = f"http://127.0.0.1:{server.port}"
    for path in ("/dashboard", "/dashboard/jobs", "/dashboard/assets/app.js"):
        assert httpx.get(base + path).status_code == 404, path
    assert httpx.get(f"{base}/healthz").status_code == 200


def test_the_assets_are_package_data() -> None:
    """pyproject ships every file of the dashboard with the package."""
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '"static/dashboard/**/*"' in pyproject
