"""Schedules' due times: cron in a time zone, `@every` on multiples since the epoch, and
INVALID_SCHEDULE for what does not parse."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from queuelog.service.errors import InvalidSchedule
from queuelog.service.timing import timing


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)


def test_cron_in_a_time_zone() -> None:
    t = timing("30 9 * * *", "Europe/Paris")  # 09:30 in Paris: 08:30 UTC in winter
    assert t.next_after(utc(2026, 1, 5, 8, 0)) == utc(2026, 1, 5, 8, 30)
    assert t.next_after(utc(2026, 7, 5, 8, 0)) == utc(2026, 7, 6, 7, 30)  # summer: 07:30 UTC
    assert t.latest(utc(2026, 1, 5, 8, 30)) == utc(2026, 1, 5, 8, 30)  # a due time is its own
    assert t.latest(utc(2026, 1, 5, 8, 29, 59)) == utc(2026, 1, 4, 8, 30)


def test_every_is_on_multiples_of_its_period_since_the_epoch() -> None:
    t = timing("@every 15m", "UTC")
    assert t.latest(utc(2026, 1, 5, 8, 44, 59)) == utc(2026, 1, 5, 8, 30)
    assert t.next_after(utc(2026, 1, 5, 8, 30)) == utc(2026, 1, 5, 8, 45)
    one = timing("@every 1s", "UTC")
    assert one.next_after(utc(2026, 1, 5, 8, 0, 0).replace(microsecond=500)) == utc(
        2026, 1, 5, 8, 0, 1
    )


@pytest.mark.parametrize(
    ("cron", "zone", "field"),
    [
        ("* * * *", "UTC", "cron"),
        ("* * * * * *", "UTC", "cron"),
        ("61 * * * *", "UTC", "cron"),
        ("@hourly", "UTC", "cron"),
        ("@every 0s", "UTC", "cron"),
        ("@every 5d", "UTC", "cron"),
        ("@every 9000h", "UTC", "cron"),
        ("0 0 31 2 *", "UTC", "cron"),  # parses, but never fires
        ("0 0 30 2 *", "Europe/Paris", "cron"),
        ("* * * * *", "Mars/Olympus", "timezone"),
        ("* * * * *", "../etc/passwd", "timezone"),
    ],
)
def test_what_does_not_parse_is_invalid_schedule(cron: str, zone: str, field: str) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        timing(cron, zone, ["input"])
    assert caught.value.code == "INVALID_SCHEDULE"
    assert caught.value.field == ["input", field]
