"""A raw HTTP client for the attacks: any body, any headers."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support import LiveServer

CLIENT = httpx.Client(timeout=30)
GRAPHQL_RESPONSE = "application/graphql-response+json"


def send(
    server: LiveServer,
    query: str,
    variables: dict[str, Any] | None = None,
    key: str | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """POST one operation as JSON, with `key` as the bearer and any extra headers."""
    all_headers = {"Authorization": f"Bearer {key}"} if key else {}
    all_headers.update(headers or {})
    body = {"query": query, "variables": variables or {}}
    return CLIENT.post(server.url, json=body, headers=all_headers)


def raw(server: LiveServer, content: bytes, content_type: str | None, **kw: Any) -> httpx.Response:
    headers = {"Content-Type": content_type} if content_type else {}
    headers.update(kw.pop("headers", {}))
    return CLIENT.post(server.url, content=content, headers=headers, **kw)
