"""Transport attacks and GraphQL-over-HTTP compliance, over real HTTP and WebSocket."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
from html.parser import HTMLParser

import httpx
import orjson
import pytest
import websockets

from tests.security.http import CLIENT, GRAPHQL_RESPONSE, raw, send
from tests.support import ADMIN_SECRET, LiveServer

JSON_BODY = b'{"query": "{ __typename }"}'


def error_code(response: httpx.Response) -> str:
    return str(response.json()["errors"][0]["extensions"]["code"])


def test_ten_megabyte_body_is_refused_with_413(edge: LiveServer) -> None:
    body = b'{"query": "{ __typename }", "variables": {"x": "' + b"a" * 10_000_000 + b'"}}'
    response = raw(edge, body, "application/json")
    assert response.status_code == 413 and error_code(response) == "PAYLOAD_TOO_LARGE"
    # streamed without a Content-Length, it is cut off as it arrives
    chunks = (body[i : i + 65_536] for i in range(0, len(body), 65_536))
    response = CLIENT.post(edge.url, content=chunks, headers={"Content-Type": "application/json"})
    assert response.status_code == 413


def test_huge_variables_object_is_answered_cleanly(edge: LiveServer) -> None:
    variables = {f"v{i}": i for i in range(100_000)}  # ~1.4 MB, under the body limit
    response = send(edge, "{ __typename }", variables)
    assert response.status_code == 200 and response.json() == {"data": {"__typename": "Query"}}


def test_deeply_nested_json_is_a_400_not_a_500(edge: LiveServer) -> None:
    nested = b'{"a":' * 10_000 + b"1" + b"}" * 10_000
    body = b'{"query": "{ __typename }", "variables": ' + nested + b"}"
    response = raw(edge, body, "application/json")
    assert response.status_code == 400 and error_code(response) == "BAD_REQUEST"


@pytest.mark.parametrize(
    "body",
    [b'{"query": "{ __typename }", "x": "\xff\xfe"}', b"\xc3\x28", b"NONSENSE", b'{"query":'],
)
def test_invalid_utf8_and_broken_json_are_400(edge: LiveServer, body: bytes) -> None:
    response = raw(edge, body, "application/json")
    assert response.status_code == 400 and error_code(response) == "BAD_REQUEST"


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"],
)
def test_wrong_content_types_are_415(edge: LiveServer, content_type: str | None) -> None:
    response = raw(edge, JSON_BODY, content_type)
    assert response.status_code == 415 and error_code(response) == "UNSUPPORTED_MEDIA_TYPE"


def test_non_utf8_charset_is_415(edge: LiveServer) -> None:
    body = JSON_BODY.decode().encode("utf-16")
    response = raw(edge, body, "application/json; charset=utf-16")
    assert response.status_code == 415


@pytest.mark.parametrize("body", [b'"{ __typename }"', b"42", b"null"])
def test_a_body_that_is_not_an_object_is_400(edge: LiveServer, body: bytes) -> None:
    response = raw(edge, body, "application/json")
    assert response.status_code == 400 and error_code(response) == "BAD_REQUEST"


def test_batch_array_is_refused_clearly(edge: LiveServer, job_type: str) -> None:
    batch = [{"query": "{ __typename }"}] * 2
    response = CLIENT.post(edge.url, json=batch)
    assert response.status_code == 400
    assert "batched operations" in response.json()["errors"][0]["message"]


def test_get_runs_queries_only(edge: LiveServer) -> None:
    ok = CLIENT.get(edge.url, params={"query": "{ __typename }"})
    assert ok.status_code == 200 and ok.json() == {"data": {"__typename": "Query"}}
    mutation = 'mutation { revokeApiKey(name: "admin") }'
    refused = CLIENT.get(
        edge.url, params={"query": mutation}, headers={"Authorization": f"Bearer {ADMIN_SECRET}"}
    )
    assert refused.status_code == 405 and refused.headers["allow"] == "POST"
    assert error_code(refused) == "METHOD_NOT_ALLOWED"
    assert send(edge, "{ viewer { name } }", key=ADMIN_SECRET).status_code == 200  # not revoked


# -- GraphQL over HTTP: media types and status codes ---------------------------------------


@pytest.mark.parametrize(
    ("accept", "media"),
    [
        (None, "application/json"),
        ("*/*", "application/json"),
        ("application/json", "application/json"),
        (GRAPHQL_RESPONSE, GRAPHQL_RESPONSE),
        (f"{GRAPHQL_RESPONSE}, application/json;q=0.9", GRAPHQL_RESPONSE),
        (f"application/json, {GRAPHQL_RESPONSE};q=0.5", "application/json"),
    ],
)
def test_media_type_follows_accept(edge: LiveServer, accept: str | None, media: str) -> None:
    headers = {"Content-Type": "application/json"}
    if accept:
        headers["Accept"] = accept
    response = httpx.post(edge.url, content=JSON_BODY, headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"] == f"{media}; charset=utf-8"


def test_unacceptable_accept_is_406(edge: LiveServer) -> None:
    response = raw(edge, JSON_BODY, "application/json", headers={"Accept": "text/xml"})
    assert response.status_code == 406


@pytest.mark.parametrize(
    ("query", "code"),
    [("{", "GRAPHQL_PARSE_FAILED"), ("{ nope }", "GRAPHQL_VALIDATION_FAILED")],
)
def test_request_errors_status_by_media_type(edge: LiveServer, query: str, code: str) -> None:
    strict = send(edge, query, headers={"Accept": GRAPHQL_RESPONSE})
    assert strict.status_code == 400
    assert strict.headers["content-type"].startswith(GRAPHQL_RESPONSE)
    assert "data" not in strict.json() and error_code(strict) == code
    legacy = send(edge, query, headers={"Accept": "application/json"})
    assert legacy.status_code == 200 and "data" not in legacy.json()
    assert error_code(legacy) == code


def test_variables_that_do_not_coerce_are_a_request_error(edge: LiveServer) -> None:
    query = "query($n: Int!) { jobs(first: $n) { totalCount } }"
    response = send(edge, query, {"n": "ten"}, ADMIN_SECRET, {"Accept": GRAPHQL_RESPONSE})
    assert response.status_code == 400 and error_code(response) == "BAD_USER_INPUT"


def test_execution_results_are_200_even_with_field_errors(edge: LiveServer) -> None:
    response = send(edge, "{ viewer { name } }", headers={"Accept": GRAPHQL_RESPONSE})
    assert response.status_code == 200
    body = response.json()
    assert "data" in body and error_code(response) == "UNAUTHENTICATED"


@pytest.mark.parametrize(
    "params", ['{"query": 1}', '{"query": "{ __typename }", "variables": [7]}']
)
def test_malformed_parameters_are_400(edge: LiveServer, params: str) -> None:
    response = raw(edge, params.encode(), "application/json", headers={"Accept": GRAPHQL_RESPONSE})
    assert response.status_code == 400 and "data" not in response.json()


# -- headers ---------------------------------------------------------------------------------


SECURITY = {"x-content-type-options": "nosniff", "x-frame-options": "DENY"}


def test_security_headers_and_request_id_on_every_response(edge: LiveServer) -> None:
    for response in (
        send(edge, "{ __typename }"),
        raw(edge, b"x" * 3_000_000, "application/json"),  # 413
        send(edge, "{ __typename }", key="ql_wrong"),  # a refused key
        CLIENT.get(edge.url.replace("/graphql", "/healthz")),
    ):
        for name, value in SECURITY.items():
            assert response.headers[name] == value, (response.status_code, name)
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
        assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-request-id"])
    echoed = send(edge, "{ __typename }", headers={"X-Request-Id": "trace-42"})
    assert echoed.headers["x-request-id"] == "trace-42"
    forged = send(edge, "{ __typename }", headers={"X-Request-Id": "x; injected=1"})
    assert re.fullmatch(r"[0-9a-f]{32}", forged.headers["x-request-id"])


class _Assets(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self.inline: list[str] = []
        self._in_inline = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "script":
            if a.get("src"):
                self.scripts.append(str(a["src"]))
            else:
                self._in_inline = True
                self.inline.append("")
        elif tag == "link" and a.get("rel") == "stylesheet":
            self.styles.append(str(a["href"]))

    def handle_endtag(self, tag: str) -> None:
        self._in_inline = self._in_inline and tag != "script"

    def handle_data(self, data: str) -> None:
        if self._in_inline:
            self.inline[-1] += data


def test_graphiql_page_loads_everything_under_its_csp(edge: LiveServer) -> None:
    page = CLIENT.get(edge.url, headers={"Accept": "text/html"})
    assert page.status_code == 200 and page.headers["x-frame-options"] == "DENY"
    directives = page.headers["content-security-policy"].split("; ")
    csp = {name: value for name, _, value in (d.partition(" ") for d in directives)}
    assets = _Assets()
    assets.feed(page.text)
    assert assets.scripts and assets.styles and assets.inline
    # every script and stylesheet is queuelog's own: the page works offline
    for url in assets.scripts + assets.styles:
        assert url.startswith("/graphiql/assets/"), url
        asset = CLIENT.get(f"http://127.0.0.1:{edge.port}{url}")
        assert asset.status_code == 200 and asset.headers["x-content-type-options"] == "nosniff"
        assert "immutable" in asset.headers["cache-control"]
    for code in assets.inline:
        digest = base64.b64encode(hashlib.sha256(code.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp["script-src"]
    for name in ("script-src", "style-src"):
        sources = csp[name].split()
        assert sources[0] == "'self'" and all(s.startswith("'sha256-") for s in sources[1:])
    assert csp["connect-src"] == "'self'" and csp["frame-ancestors"] == "'none'"


def test_introspection_and_graphiql_can_be_turned_off(locked: LiveServer) -> None:
    assert CLIENT.get(locked.url, headers={"Accept": "text/html"}).status_code == 404
    assets = f"http://127.0.0.1:{locked.port}/graphiql/assets/react@18.2.0/LICENSE"
    assert CLIENT.get(assets).status_code == 404
    body = send(locked, "{ __schema { types { name } } }").json()
    assert body["errors"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"
    assert send(locked, "{ __typename }").json() == {"data": {"__typename": "Query"}}


def test_field_suggestions_only_when_configured(edge: LiveServer, locked: LiveServer) -> None:
    assert "Did you mean" not in send(edge, "{ viewr { name } }").text
    assert "Did you mean" not in send(edge, "{ jobs(status: PENDNG) { totalCount } }").text
    assert "Did you mean" in send(locked, "{ viewr { name } }").text


def test_execution_timeout(locked: LiveServer) -> None:
    response = send(locked, "{ jobs { totalCount } }", key=ADMIN_SECRET)
    assert response.status_code == 503 and "data" not in response.json()
    assert error_code(response) == "EXECUTION_TIMEOUT"
    assert "QUEUELOG_EXECUTION_TIMEOUT_SECONDS" in response.json()["errors"][0]["message"]


# -- WebSocket ---------------------------------------------------------------------------------


async def _handshake(server: LiveServer, origin: str | None) -> str:
    headers = {"Origin": origin} if origin else {}
    try:
        async with websockets.connect(
            server.ws_url,
            subprotocols=["graphql-transport-ws"],
            additional_headers=headers,  # type: ignore[list-item]
        ) as ws:
            await ws.send(
                orjson.dumps(
                    {
                        "type": "connection_init",
                        "payload": {"authorization": f"Bearer {ADMIN_SECRET}"},
                    }
                ).decode()
            )
            return str(orjson.loads(await ws.recv())["type"])
    except websockets.InvalidStatus as exc:
        return f"http {exc.response.status_code}"


def test_websocket_origins(locked: LiveServer, edge: LiveServer) -> None:
    assert asyncio.run(_handshake(locked, "https://evil.example")) == "http 403"
    assert asyncio.run(_handshake(locked, "https://app.example.com")) == "connection_ack"
    assert asyncio.run(_handshake(locked, None)) == "connection_ack"  # not a browser
    assert asyncio.run(_handshake(edge, "https://app.example.com")) == "http 403"


def test_websocket_message_over_the_limit_closes_the_connection(edge: LiveServer) -> None:
    async def attack() -> int | None:
        async with websockets.connect(edge.ws_url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
            await ws.send("x" * 3_000_000)
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.recv()
            return closed.value.rcvd.code if closed.value.rcvd else None

    assert asyncio.run(attack()) == 1009


# -- subscriptions over HTTP -----------------------------------------------------------------

SUBSCRIPTION = "subscription { jobStatusChanged { cursor } }"


@pytest.mark.parametrize("key", [None, ADMIN_SECRET], ids=["anonymous", "admin"])
@pytest.mark.parametrize(
    "document",
    [
        SUBSCRIPTION,
        f"subscription Watch {SUBSCRIPTION[len('subscription ') :]}",
        "subscription { ...F } fragment F on Subscription { jobStatusChanged { cursor } }",
        "{ __typename } subscription S { jobStatusChanged { cursor } }",
    ],
    ids=["plain", "named", "fragment", "beside-a-query"],
)
@pytest.mark.parametrize("method", ["POST", "GET"])
def test_a_subscription_over_http_is_a_clear_400(
    edge: LiveServer, key: str | None, document: str, method: str
) -> None:
    before = len(edge.log())
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    params = {"query": document}
    if document.startswith("{ __typename }"):
        params["operationName"] = "S"
    if method == "POST":
        response = CLIENT.post(edge.url, json=params, headers=headers)
    else:
        response = CLIENT.get(edge.url, params=params, headers=headers)
    assert response.status_code == 400, response.text
    assert error_code(response) == "BAD_REQUEST"
    assert "WebSocket" in response.json()["errors"][0]["message"]
    assert "Traceback" not in edge.log()[before:]
