"""Retry delays: exponential, full jitter, capped; a base of 0 retries at once."""

from __future__ import annotations

import random

from queuelog.service.backoff import backoff_seconds


def test_full_jitter_stays_within_the_exponential_ceiling() -> None:
    rand = random.Random(0)
    for retry in range(8):
        ceiling = 2.0 * 2**retry
        delays = [backoff_seconds(retry, 2.0, 10_000.0, rand) for _ in range(300)]
        assert all(0 <= d <= ceiling for d in delays)
        # full jitter spreads over the whole range, not just near the ceiling
        assert min(delays) < ceiling * 0.1 and max(delays) > ceiling * 0.9


def test_the_cap_bounds_every_delay() -> None:
    rand = random.Random(1)
    delays = [backoff_seconds(retry, 1.0, 30.0, rand) for retry in range(200) for _ in range(5)]
    assert max(delays) <= 30.0 and max(delays) > 25.0


def test_huge_retry_counts_do_not_overflow() -> None:
    assert 0 <= backoff_seconds(10**9, 1.0, 3600.0, random.Random(2)) <= 3600.0


def test_base_zero_or_cap_zero_is_instant() -> None:
    rand = random.Random(3)
    assert {backoff_seconds(r, 0.0, 3600.0, rand) for r in range(30)} == {0.0}
    assert backoff_seconds(5, 1.0, 0.0, rand) == 0.0


def test_a_seeded_source_gives_repeatable_delays() -> None:
    a = [backoff_seconds(r, 1.0, 60.0, random.Random(7)) for r in range(10)]
    b = [backoff_seconds(r, 1.0, 60.0, random.Random(7)) for r in range(10)]
    assert a == b
