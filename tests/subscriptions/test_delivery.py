"""What a subscriber sees, through real WebSocket clients against `queuelog serve`."""

from __future__ import annotations

import asyncio
import contextlib

from tests.subscriptions.wsclient import claim, complete, enqueue, history, ws
from tests.support import ADMIN_SECRET, LiveServer


async def test_a_job_s_whole_life_with_cursors(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    worker = server.create_key("WORKER", [job_type])
    _, start = enqueue(server, producer, job_type)
    async with ws(server, producer) as client:
        op = await client.subscribe({"type": job_type, "after": start})
        job_id, _ = enqueue(server, producer, job_type)
        assert claim(server, worker, job_type) != job_id  # the older job first
        assert claim(server, worker, job_type) == job_id
        complete(server, worker, job_id)
        events = await client.events(op, 4)  # the marker job's RUNNING among them
        seen = [e for e in events if e["job"]["id"] == job_id]

    assert [(e["previousStatus"], e["status"]) for e in seen] == [
        (None, "PENDING"),
        ("PENDING", "RUNNING"),
        ("RUNNING", "COMPLETED"),
    ]
    cursors = [e["cursor"] for e in seen]
    assert cursors == sorted(cursors) and len(set(cursors)) == 3
    assert cursors == history(server, producer, job_id)


async def test_without_after_it_starts_live_from_now(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    before, _ = enqueue(server, producer, job_type)
    async with ws(server, producer) as client:
        op = await client.subscribe({"type": job_type})
        # A subscription has no acknowledgement: enqueue until the first event arrives.
        made: list[str] = []
        first = None
        while first is None:
            made.append(enqueue(server, producer, job_type)[0])
            with contextlib.suppress(TimeoutError):
                first = await client.event(op, wait=0.5)
        later, _ = enqueue(server, producer, job_type)
        rest = [first["job"]["id"]]
        while rest[-1] != later:
            rest.append((await client.event(op))["job"]["id"])
    assert before not in rest
    assert rest == [*made[made.index(rest[0]) :], later]


async def test_filters_combine(server: LiveServer, job_type: str) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    worker = server.create_key("WORKER", [job_type])
    _, start = enqueue(server, producer, job_type)
    async with ws(server, ADMIN_SECRET) as client:
        done = await client.subscribe(
            {"type": job_type, "statuses": ["COMPLETED", "FAILED"], "after": start}
        )
        a, _ = enqueue(server, producer, job_type)
        one = await client.subscribe({"jobId": a, "statuses": ["RUNNING"], "after": start})
        other_type = await client.subscribe({"type": "email", "jobId": a, "after": start})
        claim(server, worker, job_type)  # the marker job
        assert claim(server, worker, job_type) == a
        complete(server, worker, a)

        got = {m["id"]: m["payload"]["data"]["jobStatusChanged"] for m in await client.take(2)}
        assert got.keys() == {done, one}
        assert (got[done]["status"], got[done]["job"]["id"]) == ("COMPLETED", a)
        assert (got[one]["status"], got[one]["job"]["id"]) == ("RUNNING", a)
        # jobId and a type it does not have: nothing, ever.
        with contextlib.suppress(TimeoutError):
            unexpected = await client.receive(wait=1)
            raise AssertionError(f"unexpected message {unexpected}")
        await client.send({"id": other_type, "type": "complete"})


async def test_resume_after_disconnect_has_no_gap_and_no_duplicate(
    server: LiveServer, job_type: str
) -> None:
    """Another client keeps changing jobs the whole time, during the replay included."""
    producer = server.create_key("PRODUCER", [job_type])
    worker = server.create_key("WORKER", [job_type])
    marker, start = enqueue(server, producer, job_type)
    stop = asyncio.Event()
    made = [marker]

    def churn_once() -> None:
        made.append(enqueue(server, producer, job_type)[0])
        complete(server, worker, claim(server, worker, job_type))

    async def churn() -> None:
        while not stop.is_set():
            await asyncio.to_thread(churn_once)

    task = asyncio.create_task(churn())
    try:
        seen: list[dict[str, str]] = []
        cursor = start
        for _ in range(3):  # subscribe, read a little, vanish; again from the last cursor
            async with ws(server, producer) as client:
                op = await client.subscribe({"type": job_type, "after": cursor})
                seen += await client.events(op, 12)
                cursor = seen[-1]["cursor"]
            await asyncio.sleep(0.3)  # changes keep coming while nobody listens
    finally:
        stop.set()
        await task
    async with ws(server, producer) as client:  # catch up with everything that happened
        op = await client.subscribe({"type": job_type, "after": cursor})
        expected = [c for job in made for c in history(server, producer, job)]
        expected = sorted(c for c in expected if c > start)
        while seen[-1]["cursor"] != expected[-1]:
            seen.append(await client.event(op))

    cursors = [e["cursor"] for e in seen]
    assert cursors == expected  # every event, in cursor order, once


async def test_malformed_or_future_cursor_is_bad_user_input(
    server: LiveServer, job_type: str
) -> None:
    producer = server.create_key("PRODUCER", [job_type])
    async with ws(server, producer) as client:
        for after in ("abc", "-1", "١٢", "9" * 40, "999999999999999"):
            op = await client.subscribe({"after": after})
            error = await client.error(op)
            assert error["extensions"]["code"] == "BAD_USER_INPUT", (after, error)
