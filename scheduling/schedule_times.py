"""When a schedule fires: a cron line read in an IANA time zone, as UTC instants. Pure (croniter and zoneinfo).

Daylight saving time: each wall-clock time fires once. A time the clocks skip (spring forward, 02:30 in
Europe/Berlin on the last Sunday of March) fires at the first moment after the gap (03:00); a time the
clocks pass twice (fall back) fires at its first occurrence only, as Vixie cron does.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

# A year of minutes would be 525,600 fire times; reading more than this many to answer one question is a
# sign of a question asked wrongly (the callers bound their windows).
MAX_STEPS = 50_000
MONTH = timedelta(days=30)


def _repeated(local: datetime) -> bool:
    """Whether a local time is the second pass of a wall-clock time (fall back)."""
    return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()


def _walk(cron: str, zone: str, start: datetime, *, backward: bool) -> Iterator[datetime]:
    tz = ZoneInfo(zone)
    it = croniter(cron, start.astimezone(tz))
    step = it.get_prev if backward else it.get_next
    for _ in range(MAX_STEPS):
        local = step(datetime).astimezone(UTC).astimezone(tz)
        if not _repeated(local):
            yield local.astimezone(UTC)


def next_fire(cron: str, zone: str, after: datetime) -> datetime:
    """The first fire time strictly after `after` (UTC)."""
    return next(_walk(cron, zone, after, backward=False))


def next_fires(cron: str, zone: str, after: datetime, count: int) -> list[datetime]:
    """The next `count` fire times strictly after `after` (UTC, earliest first)."""
    out: list[datetime] = []
    for at in _walk(cron, zone, after, backward=False):
        if len(out) == count:
            break
        out.append(at)
    return out


def fires_between(cron: str, zone: str, since: datetime, until: datetime, limit: int) -> list[datetime]:
    """The fire times in [since, until], latest first, at most `limit` of them."""
    out: list[datetime] = []
    # croniter's previous is strictly before its start: start a microsecond after `until` to include it
    for at in _walk(cron, zone, until + timedelta(microseconds=1), backward=True):
        if at < since or len(out) == limit:
            break
        out.append(at)
    return out


def interval_after(cron: str, zone: str, at: datetime) -> timedelta:
    """How long after the fire time `at` the next one comes: how late a missed run may still start."""
    return next_fire(cron, zone, at) - at


def runs_in_month(cron: str, zone: str, start: datetime) -> int:
    """How many times the schedule fires in the 30 days from `start` (included) (a quote's month of runs)."""
    end = start + MONTH
    count = 0
    for at in _walk(cron, zone, start - timedelta(microseconds=1), backward=False):
        if at >= end:
            break
        count += 1
    return count
