"""Who sees what, through the service: which jobs (one, a page, counts) and which of their
fields each role is handed. The GraphQL types render these jobs as they come."""

from __future__ import annotations

from queuelog.service.jobs import JobService
from queuelog.service.models import Actor, EnqueueRequest, Job, Role, Status
from tests.service.test_rules import ADMIN, P1, P2, W1, W2, claim_one, refused
from tests.support import Clock

KEY = "order-17"


async def _failed_job_with_a_key(svc: JobService) -> Job:
    """P1's job, enqueued with an idempotency key, that W1 claimed and failed for good."""
    job, _ = await svc.enqueue(P1, EnqueueRequest(type="email", idempotency_key=KEY))
    await claim_one(svc, W1)
    await svc.fail(W1, job.id, "smtp said no", retryable=False)
    return job


def _fields(job: Job | None) -> tuple[str | None, str | None]:
    assert job is not None
    return job.error, job.idempotency_key


async def test_error_text_only_to_admins_idempotency_key_only_to_producer_and_admins(
    svc: JobService,
) -> None:
    job = await _failed_job_with_a_key(svc)
    assert _fields(await svc.get(ADMIN, job.id)) == ("smtp said no", KEY)
    assert _fields(await svc.get(P1, job.id)) == (None, KEY)
    assert _fields(await svc.get(W1, job.id)) == (None, None)
    for viewer in (ADMIN, P1, W1):  # a page shows each job as `get` does
        page = await svc.page(viewer, status=None, job_type=None, first=10, after=None)
        assert [_fields(j) for j in page.jobs] == [_fields(await svc.get(viewer, job.id))]
    shared = await svc.get_since(W1, job.id, 0)  # read once for every subscriber
    assert _fields(shared) == (None, None)
    assert _fields(await svc.get_since(ADMIN, job.id, 0)) == ("smtp said no", KEY)


async def test_what_a_write_hands_back_is_shown_as_its_caller_may_see_it(
    svc: JobService, clock: Clock
) -> None:
    job, _ = await svc.enqueue(P1, EnqueueRequest(type="email", idempotency_key=KEY))
    assert job.idempotency_key == KEY  # its producer's own
    (claimed,) = await svc.claim(W1, ["email"], None)
    assert claimed.idempotency_key is None
    failed, retried = await svc.fail(W1, job.id, "try again")
    assert retried and _fields(failed) == (None, None)
    clock.advance(3600)  # past its backoff
    (again,) = await svc.claim(W1, ["email"], None, limit=1)
    done = await svc.complete(W1, again.id, None)
    assert _fields(done) == (None, None)
    e = await refused("INVALID_STATE", svc.cancel(P1, job.id))  # the job it carries, too
    assert _fields(e.job) == (None, KEY)


async def test_each_role_sees_its_own_jobs_and_counts(svc: JobService) -> None:
    mine, _ = await svc.enqueue(P1, EnqueueRequest(type="email"))
    theirs, _ = await svc.enqueue(P2, EnqueueRequest(type="email"))
    (held,) = await svc.claim(W1, ["email"], None)
    assert held.id == mine.id
    assert await svc.get(P1, theirs.id) is None
    assert await svc.get(W2, mine.id) is None
    assert (await svc.get(W1, mine.id)) is not None
    assert await svc.get(W1, theirs.id) is None  # pending: held by nobody
    for viewer, expected in ((P1, [mine.id]), (W1, [mine.id]), (ADMIN, [theirs.id, mine.id])):
        page = await svc.page(viewer, status=None, job_type=None, first=10, after=None)
        assert [j.id for j in page.jobs] == expected
        assert page.total == len(expected)
    assert (await svc.counts(P2, None))["pending"] == 1
    assert (await svc.counts(W1, None))["running"] == 1
    assert (await svc.counts(W2, None)) == {s.value: 0 for s in Status}


async def test_a_worker_that_failed_its_own_job_is_told_its_state_whatever_its_error_said(
    svc: JobService,
) -> None:
    """Whether a worker lost its job to an expired lease is a fact of the job (its claim
    taken back), never read from the error text a worker wrote."""
    job, _ = await svc.enqueue(P1, EnqueueRequest(type="email"))
    await claim_one(svc, W1)
    await svc.fail(W1, job.id, "lease expired", retryable=False)  # its own words
    e = await refused("INVALID_STATE", svc.complete(W1, job.id, None))
    assert e.job is not None and e.job.status is Status.FAILED


def test_actors_have_no_visibility_rule_of_their_own() -> None:
    assert not hasattr(Actor("x", Role.ADMIN), "may_see")
