"""A subscription that lives through thousands of changes holds no more memory at the end
than after its first few: graphql-core kept two entries an event in the subscription's
sub-field memo for as long as the subscription lasted (see `schema.executor`).

In-process server (`inprocess.live`), so that the server's allocations can be traced; a
real WebSocket client."""

from __future__ import annotations

import tracemalloc

import pytest

from queuelog.api.fastpath.executor import SharedEvents
from queuelog.runtime import Services
from queuelog.service.models import Actor, EnqueueRequest, Role
from tests.inprocess import until
from tests.subscriptions.wsclient import WS, ws
from tests.support import LiveServer

SHOWING_THE_JOB = """subscription($type: String) {
  jobStatusChanged(type: $type) { cursor status job { id status } }
}"""
PRODUCER = Actor("p", Role.PRODUCER)
EVENTS = 600


_shared_events_init = SharedEvents.__init__


def _small_shared_events(self: SharedEvents, max_bytes: int = 2_048) -> None:
    _shared_events_init(self, max_bytes)


def graphql_execution_bytes() -> int:
    """Bytes allocated by graphql-core's execution and still held."""
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(True, "*/graphql/execution/*")]
    )
    return sum(stat.size for stat in snapshot.statistics("filename"))


async def deliver(services: Services, client: WS, op: str, n: int) -> None:
    for _ in range(n):
        await services.service.enqueue(PRODUCER, EnqueueRequest("email"))
        event = await client.event(op)
        assert event["job"]["status"] in ("PENDING", "RUNNING", "COMPLETED"), event


async def test_a_subscription_s_memory_does_not_grow_with_its_events(
    live: tuple[LiveServer, str], services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Events' results are kept for subscribers that ask alike, up to a bound in bytes
    # (`SharedEvents`, tested in test_fan_out): a small one, so that the warm-up fills it
    # and only growth without bound shows.
    monkeypatch.setattr(SharedEvents, "__init__", _small_shared_events)
    server, key = live
    async with ws(server, key) as client:
        op = await client.subscribe({"type": "email"}, SHOWING_THE_JOB)
        await until(lambda: services.feed.followers == 1)
        tracemalloc.start()
        try:
            await deliver(services, client, op, 20)  # warm: the first events fill the memo
            before = graphql_execution_bytes()
            await deliver(services, client, op, EVENTS)
            grown = graphql_execution_bytes() - before
        finally:
            tracemalloc.stop()
    # Held before the fix: ~2 entries of a few hundred bytes an event.
    assert grown < 20 * 1024, f"{grown} bytes more after {EVENTS} events"
