"""CORS for browser frontends on other origins: QUEUELOG_ALLOWED_ORIGINS opens HTTP as it
opens the WebSocket, and an origin not listed gets no CORS header at all."""

from __future__ import annotations

import httpx

from tests.security.http import CLIENT, send
from tests.support import LiveServer

ALLOWED = "https://app.example.com"  # the `locked` server's QUEUELOG_ALLOWED_ORIGINS


def preflight(server: LiveServer, origin: str) -> httpx.Response:
    return CLIENT.options(
        server.url,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )


def cors_headers(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.startswith("access-control-")}


def test_an_allowed_origin_gets_the_preflight_and_the_echo(locked: LiveServer) -> None:
    answer = preflight(locked, ALLOWED)
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == ALLOWED
    allowed_headers = answer.headers["access-control-allow-headers"].lower()
    assert "authorization" in allowed_headers and "content-type" in allowed_headers
    assert "POST" in answer.headers["access-control-allow-methods"]
    assert answer.headers["x-content-type-options"] == "nosniff"  # the edge's headers too

    request = send(locked, "{ __typename }", headers={"Origin": ALLOWED})
    assert request.headers["access-control-allow-origin"] == ALLOWED
    exposed = request.headers["access-control-expose-headers"].lower()
    assert "retry-after" in exposed and "www-authenticate" in exposed


def test_another_origin_gets_no_cors_headers(locked: LiveServer, edge: LiveServer) -> None:
    for server, origin in ((locked, "https://evil.example.net"), (edge, ALLOWED)):
        answer = preflight(server, origin)
        assert answer.status_code == 405, answer.text
        assert cors_headers(answer) == {}
        request = send(server, "{ __typename }", headers={"Origin": origin})
        assert cors_headers(request) == {}
