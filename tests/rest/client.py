"""What the REST tests send: raw HTTP to a live server's REST routes, with whatever key,
headers and body a caller (or an attacker) chooses."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support import ADMIN_SECRET, LiveServer

CLIENT = httpx.Client(timeout=30)
UNSET: Any = object()


def base(server: LiveServer) -> str:
    return f"http://127.0.0.1:{server.port}"


def call(
    server: LiveServer,
    method: str,
    path: str,
    key: str | None = None,
    json: Any = UNSET,
    **kw: Any,
) -> httpx.Response:
    headers = dict(kw.pop("headers", {}))
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    if json is not UNSET:
        kw["json"] = json
    return CLIENT.request(method, base(server) + path, headers=headers, **kw)


def ok(resp: httpx.Response, status: int = 200) -> Any:
    """The body of a response that must have `status`."""
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"] == "application/json"
    return resp.json()


def refused(resp: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The body of an error that must have `status` and `code` (GraphQL's code)."""
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"].startswith("application/json"), resp.headers
    body = resp.json()
    assert body["code"] == code, body
    assert isinstance(body["message"], str) and body["message"], body
    return dict(body)


def enqueued(server: LiveServer, key: str, **body: Any) -> dict[str, Any]:
    """POST /jobs that must create a job; the job."""
    return dict(ok(call(server, "POST", "/jobs", key, body), 201))


def claimed(
    server: LiveServer, key: str, types: list[str] | None = None, **body: Any
) -> dict[str, Any] | None:
    """POST /jobs/claim; the job, or None for 204."""
    resp = call(server, "POST", "/jobs/claim", key, {"types": types, **body})
    if resp.status_code == 204:
        assert resp.content == b""
        return None
    return dict(ok(resp))


def admin_view(server: LiveServer, job_type: str) -> list[dict[str, Any]]:
    """Every job of `job_type` as an admin reads it over REST: a refused request must leave
    this as it was."""
    page = ok(call(server, "GET", f"/jobs?type={job_type}&limit=100", ADMIN_SECRET))
    assert page["has_next"] is False
    return list(page["jobs"])


def admin_job(server: LiveServer, job_id: int) -> dict[str, Any]:
    return dict(ok(call(server, "GET", f"/jobs/{job_id}", ADMIN_SECRET)))
