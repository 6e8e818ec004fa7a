"""WebSocket protocol attacks, on both subprotocols: malformed messages, repeated and
missing `connection_init`, bad keys, and operations refused before they run."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import orjson
import pytest

from tests.security.conftest import DEFAULT_LIMITS, start
from tests.security.ws import LEGACY, PROTOCOLS, TRANSPORT, acknowledged, errors_of, opened
from tests.support import ADMIN_SECRET, LiveServer

INIT_TIMEOUT = 1.0


@pytest.fixture(scope="module")
def sockets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The shipped limits, a short connection_init timeout. Nothing here reaches storage
    beyond key lookups, so one backend is enough."""
    settings = {
        **DEFAULT_LIMITS,
        "rate_limit_burst": 100_000,
        "ws_init_timeout_seconds": INIT_TIMEOUT,
    }
    yield from start(tmp_path_factory.mktemp("sockets"), "sqlite", **settings)


@pytest.fixture
def quiet_log(sockets: LiveServer) -> Iterator[None]:
    """The test makes the server log no traceback: clients' mistakes are not faults."""
    before = len(sockets.log())
    yield
    assert "Traceback" not in sockets.log()[before:], sockets.log()[before:]


# Messages whose shape is wrong, each as the protocol under test spells an operation.
MALFORMED: dict[str, Callable[[str], object]] = {
    "array": lambda start: "[1, 2]",
    "number": lambda start: "5",
    "string": lambda start: '"subscribe"',
    "null": lambda start: "null",
    "no type": lambda start: {"id": "1", "payload": {"query": "{ __typename }"}},
    "type not a string": lambda start: {"type": ["subscribe"]},
    "unknown type": lambda start: {"type": "x" * 500},
    "payload a string": lambda start: {"id": "1", "type": start, "payload": "{ __typename }"},
    "payload a list": lambda start: {"id": "1", "type": start, "payload": [1]},
    "no payload": lambda start: {"id": "1", "type": start},
    "payload without query": lambda start: {"id": "1", "type": start, "payload": {}},
    "list as id": lambda start: {"id": [1], "type": start, "payload": {"query": "{ a }"}},
    "object as id": lambda start: {"id": {}, "type": start, "payload": {"query": "{ a }"}},
    "no id": lambda start: {"type": start, "payload": {"query": "{ __typename }"}},
    "empty id": lambda start: {"id": "", "type": start, "payload": {"query": "{ a }"}},
}


@pytest.mark.usefixtures("quiet_log")
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("shape", list(MALFORMED))
async def test_malformed_messages_close_4400_with_a_reason(
    sockets: LiveServer, protocol: str, shape: str
) -> None:
    start_type = "subscribe" if protocol == TRANSPORT else "start"
    async with acknowledged(sockets, protocol, ADMIN_SECRET) as socket:
        await socket.send(MALFORMED[shape](start_type))
        code, reason = await socket.closed()
    assert code == 4400 and reason, (code, reason)
    assert len(reason.encode()) <= 123


@pytest.mark.usefixtures("quiet_log")
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("frame", ["{not json", b'{"type": "ping"}'], ids=["not-json", "binary"])
async def test_frames_that_are_not_json_text_close_4400(
    sockets: LiveServer, protocol: str, frame: str | bytes
) -> None:
    async with acknowledged(sockets, protocol, ADMIN_SECRET) as socket:
        await socket.conn.send(frame)
        code, reason = await socket.closed()
    assert code == 4400 and reason, (code, reason)


@pytest.mark.usefixtures("quiet_log")
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("payload", ["yes", 5, [1]], ids=["string", "number", "list"])
async def test_connection_init_with_a_payload_not_an_object_closes_4400(
    sockets: LiveServer, protocol: str, payload: object
) -> None:
    async with opened(sockets, protocol) as socket:
        await socket.send({"type": "connection_init", "payload": payload})
        code, reason = await socket.closed()
    assert code == 4400 and reason


@pytest.mark.usefixtures("quiet_log")
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("{", "GRAPHQL_PARSE_FAILED"),
        ("subscription {", "GRAPHQL_PARSE_FAILED"),
        ("{" + " __typename" * 3_000 + " }", "QUERY_TOO_COMPLEX"),
        ("{ nope }", None),
        (5, "BAD_REQUEST"),
        (None, "BAD_REQUEST"),
        (["{ __typename }"], "BAD_REQUEST"),
    ],
    ids=["syntax", "syntax-subscription", "tokens", "validation", "int", "null", "list"],
)
async def test_operations_refused_before_execution_answer_an_error(
    sockets: LiveServer, protocol: str, query: object, code: str | None
) -> None:
    async with acknowledged(sockets, protocol, ADMIN_SECRET) as socket:
        messages = await socket.operation(query)
        assert messages[-1]["type"] == "error", messages
        errors = errors_of(messages)
        assert errors and errors[0]["message"], messages
        if code is not None:  # validation errors' codes over WebSocket: see the interop tests
            assert errors[0]["extensions"]["code"] == code, messages
        # the connection is still good for the next operation
        ok = await socket.operation("{ viewer { name } }")
        assert not errors_of(ok) and ok[-1]["type"] == "complete", ok


@pytest.mark.usefixtures("quiet_log")
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_variables_and_operation_name_of_the_wrong_type_answer_an_error(
    sockets: LiveServer, protocol: str
) -> None:
    async with acknowledged(sockets, protocol, ADMIN_SECRET) as socket:
        for payload in (
            {"query": "{ __typename }", "variables": [1]},
            {"query": "{ __typename }", "variables": "x"},
            {"query": "{ __typename }", "operationName": 7},
        ):
            await socket.send(socket.start_message("bad", payload))
            message = await socket.receive()
            assert message["type"] == "error" and message["id"] == "bad", message
            assert errors_of([message])[0]["extensions"]["code"] == "BAD_REQUEST"


@pytest.mark.usefixtures("quiet_log")
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_queries_and_mutations_run_over_both_protocols(
    sockets: LiveServer, protocol: str
) -> None:
    async with acknowledged(sockets, protocol, ADMIN_SECRET) as socket:
        query = await socket.operation("{ viewer { name role } }")
        assert errors_of(query) == [] and query[-1]["type"] == "complete", query
        assert query[0]["payload"]["data"] == {"viewer": {"name": "admin", "role": "ADMIN"}}
        mutation = await socket.operation(
            'mutation { enqueueJob(input: {type: "email"}) { job { status } } }'
        )
        assert errors_of(mutation) == [], mutation
        assert mutation[0]["payload"]["data"]["enqueueJob"]["job"]["status"] == "PENDING"


# -- connection_init -------------------------------------------------------------------


@pytest.mark.usefixtures("quiet_log")
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("second_key", [ADMIN_SECRET, "ql_not_a_key", None])
async def test_a_second_connection_init_closes_4429(
    sockets: LiveServer, protocol: str, second_key: str | None
) -> None:
    async with acknowledged(sockets, protocol, ADMIN_SECRET) as socket:
        payload = {} if second_key is None else {"authorization": f"Bearer {second_key}"}
        await socket.send({"type": "connection_init", "payload": payload})
        assert await socket.closed() == (4429, "Too many initialisation requests")


@pytest.mark.usefixtures("quiet_log")
async def test_repeated_inits_cost_one_socket_each(sockets: LiveServer) -> None:
    """The legacy protocol once started a keep-alive task per connection_init: a flood of
    them on one socket grew the server without bound. Now each socket gets one."""
    for _ in range(20):
        async with acknowledged(sockets, LEGACY, ADMIN_SECRET) as socket:
            for _ in range(50):
                await socket.send({"type": "connection_init", "payload": {}})
            assert (await socket.closed())[0] == 4429
    # the server still answers at once
    async with acknowledged(sockets, LEGACY, ADMIN_SECRET) as socket:
        assert errors_of(await socket.operation("{ __typename }")) == []


@pytest.mark.usefixtures("quiet_log")
async def test_the_legacy_protocol_keeps_an_acknowledged_connection_alive(
    sockets: LiveServer,
) -> None:
    """graphql-ws has no pings of its own: the server sends "ka" from the acknowledgement on."""
    async with opened(sockets, LEGACY) as socket:
        key = {"authorization": f"Bearer {ADMIN_SECRET}"}
        await socket.send({"type": "connection_init", "payload": key})
        async with asyncio.timeout(15):
            assert orjson.loads(await socket.conn.recv())["type"] == "connection_ack"
            assert orjson.loads(await socket.conn.recv()) == {"type": "ka"}


@pytest.mark.usefixtures("quiet_log")
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_no_connection_init_closes_4408(sockets: LiveServer, protocol: str) -> None:
    async with opened(sockets, protocol) as socket:
        code, reason = await socket.closed(wait=INIT_TIMEOUT + 10)
    assert (code, reason) == (4408, "Connection initialisation timeout")


@pytest.mark.usefixtures("quiet_log")
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_operations_before_connection_init_close_4401(
    sockets: LiveServer, protocol: str
) -> None:
    async with opened(sockets, protocol) as socket:
        await socket.send(socket.start_message("1", {"query": "{ __typename }"}))
        assert (await socket.closed())[0] == 4401


@pytest.mark.usefixtures("quiet_log")
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({}, "key is required"),
        ({"authorization": "Bearer ql_not_a_key"}, "key"),
        ({"authorization": "Basic abc"}, "Bearer"),
    ],
    ids=["none", "unknown", "not-bearer"],
)
async def test_a_refused_key_closes_with_the_reason(
    sockets: LiveServer, protocol: str, payload: dict[str, str], says: str
) -> None:
    async with opened(sockets, protocol) as socket:
        await socket.send({"type": "connection_init", "payload": payload})
        code, reason = await socket.closed()
    assert code == (4401 if protocol == TRANSPORT else 4403), (code, reason)
    assert says in reason, reason


@pytest.mark.usefixtures("quiet_log")
async def test_many_unauthenticated_legacy_sockets_are_all_closed(sockets: LiveServer) -> None:
    async def idle() -> int:
        async with opened(sockets, LEGACY) as socket:
            return (await socket.closed(wait=INIT_TIMEOUT + 20))[0]

    assert set(await asyncio.gather(*(idle() for _ in range(50)))) == {4408}
