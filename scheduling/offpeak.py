"""Off-peak time windows: which part of a stretch of time falls in them.

Pure module (no Django). Windows are local wall-clock times in the platform's time zone
(Django's ``TIME_ZONE``), passed in as ``tz``. A window whose end is not after its start wraps
midnight (``22:00-06:00``). All arithmetic is done on UTC instants, so a window on a day when
the clocks change lasts the real (absolute) time it covers: 00:00-08:00 is 7 h on a
spring-forward day and 9 h on a fall-back day in Europe/Berlin.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

Window = tuple[time, time]

DEFAULT_OFFPEAK_WINDOWS: tuple[Window, ...] = ((time(0, 0), time(8, 0)),)

_ONE_DAY = timedelta(days=1)


@dataclass(frozen=True)
class HourSplit:
    """How much of a duration is peak time and how much is off-peak time."""

    peak: timedelta
    offpeak: timedelta

    @property
    def total(self) -> timedelta:
        return self.peak + self.offpeak


def as_zone(tz: tzinfo | str) -> tzinfo:
    """A tzinfo from a zone name such as ``Europe/Berlin`` (or a tzinfo, returned as is)."""
    if isinstance(tz, tzinfo):
        return tz
    if not isinstance(tz, str) or not tz:
        raise ValueError(f"time zone must be a zone name or tzinfo, got {tz!r}")
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {tz!r}") from exc


def _parse_clock(text: str, where: str) -> time:
    try:
        return time.fromisoformat(text.strip())
    except ValueError as exc:
        raise ValueError(f"off-peak window {where!r}: {text.strip()!r} is not a time like 22:00") from exc


def parse_windows(text: str) -> tuple[Window, ...]:
    """Parse ``"22:00-06:00, 12:00-13:00"`` into validated windows (empty text: no windows)."""
    windows: list[Window] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        bounds = part.split("-")
        if len(bounds) != 2:
            raise ValueError(f"off-peak window {part!r} must look like HH:MM-HH:MM")
        windows.append((_parse_clock(bounds[0], part), _parse_clock(bounds[1], part)))
    return validate_windows(windows)


def format_windows(windows: Iterable[Window]) -> str:
    """The inverse of :func:`parse_windows`."""
    return ", ".join(f"{start:%H:%M}-{end:%H:%M}" for start, end in windows)


def validate_windows(windows: Iterable[Window]) -> tuple[Window, ...]:
    """Check each window is a pair of naive ``time`` values with start != end; return a tuple."""
    checked: list[Window] = []
    for window in windows:
        if not (isinstance(window, tuple | list) and len(window) == 2):
            raise ValueError(f"off-peak window {window!r} must be a (start, end) pair of times")
        start, end = window
        if not (isinstance(start, time) and isinstance(end, time)):
            raise ValueError(f"off-peak window {window!r} must be a (start, end) pair of datetime.time")
        if start.tzinfo is not None or end.tzinfo is not None:
            raise ValueError(f"off-peak window {window!r}: times are local to the platform zone, drop tzinfo")
        if start == end:
            raise ValueError(f"off-peak window {format_windows([window])} is empty (start equals end)")
        checked.append((start, end))
    return tuple(checked)


def require_aware(moment: datetime, name: str) -> None:
    """Refuse anything but a timezone-aware datetime, naming the argument."""
    if not isinstance(moment, datetime):
        raise ValueError(f"{name} must be a timezone-aware datetime, got {type(moment).__name__}")
    if moment.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got naive {moment.isoformat()}")


def require_duration(duration: timedelta) -> None:
    """Refuse anything but a non-negative timedelta."""
    if not isinstance(duration, timedelta):
        raise ValueError(f"duration must be a timedelta, got {type(duration).__name__}")
    if duration < timedelta(0):
        raise ValueError(f"duration must not be negative, got {duration}")


def _window_instances(
    first: date, last: date, windows: Sequence[Window], zone: tzinfo
) -> Iterator[tuple[datetime, datetime]]:
    """Each window opening on each local day first..last, as (start, end) UTC instants."""
    day = first
    while day <= last:
        for start, end in windows:
            end_day = day if end > start else day + _ONE_DAY
            opens = datetime.combine(day, start, tzinfo=zone).astimezone(UTC)
            closes = datetime.combine(end_day, end, tzinfo=zone).astimezone(UTC)
            if closes > opens:  # a window lost entirely in a DST gap covers nothing
                yield opens, closes
        day += _ONE_DAY


def offpeak_intervals(
    start: datetime, end: datetime, windows: Sequence[Window], tz: tzinfo | str
) -> list[tuple[datetime, datetime]]:
    """The off-peak parts of [start, end) as sorted, merged, non-overlapping UTC intervals."""
    require_aware(start, "start")
    require_aware(end, "end")
    windows = validate_windows(windows)
    zone = as_zone(tz)
    lo, hi = start.astimezone(UTC), end.astimezone(UTC)
    if hi < lo:
        raise ValueError(f"end {end.isoformat()} is before start {start.isoformat()}")
    # A window that opened the local day before `start` may still be open (wrapping windows).
    first = lo.astimezone(zone).date() - _ONE_DAY
    last = hi.astimezone(zone).date()
    pieces = sorted(
        (max(lo, opens), min(hi, closes))
        for opens, closes in _window_instances(first, last, windows, zone)
        if opens < hi and closes > lo
    )
    merged: list[tuple[datetime, datetime]] = []
    for piece_start, piece_end in pieces:
        if merged and piece_start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], piece_end))
        else:
            merged.append((piece_start, piece_end))
    return merged


def split_hours(
    start: datetime, duration: timedelta, windows: Sequence[Window], tz: tzinfo | str
) -> HourSplit:
    """Split ``duration`` of elapsed time from ``start`` into peak and off-peak parts.

    ``duration`` is real elapsed time (an hour across a DST change is still one hour).
    """
    require_aware(start, "start")
    require_duration(duration)
    begin = start.astimezone(UTC)
    offpeak = sum(
        (
            piece_end - piece_start
            for piece_start, piece_end in offpeak_intervals(begin, begin + duration, windows, tz)
        ),
        timedelta(0),
    )
    return HourSplit(peak=duration - offpeak, offpeak=offpeak)


def is_offpeak(at: datetime, windows: Sequence[Window], tz: tzinfo | str) -> bool:
    """Whether the instant ``at`` lies inside an off-peak window (start inclusive, end exclusive)."""
    require_aware(at, "at")
    instant = at.astimezone(UTC)
    return bool(offpeak_intervals(instant, instant + timedelta(microseconds=1), windows, tz))


def next_offpeak_start(at: datetime, windows: Sequence[Window], tz: tzinfo | str) -> datetime:
    """``at`` itself when it is off-peak, else the next time an off-peak window opens (in ``tz``)."""
    require_aware(at, "at")
    windows = validate_windows(windows)
    if not windows:
        raise ValueError("there are no off-peak windows, so no off-peak start")
    zone = as_zone(tz)
    if is_offpeak(at, windows, zone):
        return at
    instant = at.astimezone(UTC)
    local_day = instant.astimezone(zone).date()
    upcoming = [
        opens
        for opens, _ in _window_instances(local_day - _ONE_DAY, local_day + 2 * _ONE_DAY, windows, zone)
        if opens > instant
    ]
    return min(upcoming).astimezone(zone)
