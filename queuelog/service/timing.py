"""When a schedule is due: a 5-field cron expression read in an IANA time zone (through
croniter), or `@every <n>s|m|h`, due at each multiple of n seconds since the Unix epoch, so
that every replica computes the same due times."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from queuelog.service.errors import InvalidSchedule

EVERY = re.compile(r"@every\s+([1-9][0-9]{0,7})([smh])")
UNITS = {"s": 1, "m": 60, "h": 3600}
EVERY_MAX_SECONDS = 366 * 86_400
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Timing:
    cron: str
    zone: ZoneInfo
    every: int | None  # seconds, for `@every`

    def latest(self, now: datetime) -> datetime:
        """The latest due time at or before `now` (UTC)."""
        if self.every is not None:
            elapsed = int((now - EPOCH).total_seconds())
            return EPOCH + timedelta(seconds=elapsed - elapsed % self.every)
        # croniter's previous time is strictly before its start; due times are whole minutes
        start = now.astimezone(self.zone) + timedelta(seconds=1)
        due: datetime = croniter(self.cron, start).get_prev(datetime)
        return due.astimezone(UTC)

    def next_after(self, when: datetime) -> datetime:
        """The first due time after `when` (UTC)."""
        if self.every is not None:
            return self.latest(when) + timedelta(seconds=self.every)
        due: datetime = croniter(self.cron, when.astimezone(self.zone)).get_next(datetime)
        return due.astimezone(UTC)


def timing(cron: str, timezone: str, field: list[str] | None = None) -> Timing:
    """The timing of `cron` in `timezone`; INVALID_SCHEDULE if either does not parse, or
    if the cron expression never fires."""
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule(
            f"unknown time zone {timezone!r}", [*(field or []), "timezone"]
        ) from None
    every = EVERY.fullmatch(cron.strip())
    if every is not None:
        seconds = int(every.group(1)) * UNITS[every.group(2)]
        if seconds > EVERY_MAX_SECONDS:
            raise InvalidSchedule("@every is at most 366 days", [*(field or []), "cron"])
        return Timing(cron, zone, seconds)
    if cron.startswith("@") or len(cron.split()) != 5 or not croniter.is_valid(cron):
        raise InvalidSchedule(
            "cron must be 5 fields (minute hour day-of-month month day-of-week) or @every <n>s|m|h",
            [*(field or []), "cron"],
        )
    try:  # a date no calendar has (February 31) parses, but croniter finds no due time
        croniter(cron, EPOCH.astimezone(zone)).get_next(datetime)
    except CroniterError:
        raise InvalidSchedule(
            "cron never fires: no date matches it (such as day 31 of February)",
            [*(field or []), "cron"],
        ) from None
    return Timing(cron, zone, None)
