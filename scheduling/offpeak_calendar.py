"""The off-peak calendar: when cheap-hours work may run, per price timeline and per workspace.

Billing writes it (a row per price version, the workspace's calendar per month: billing.offpeak_sync);
the scheduler reads it here for each cycle's snapshot. A calendar without a version in force has the
default window (00:00-08:00 in the platform's zone), as a price table has.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime

from django.conf import settings
from django.db import transaction

from scheduling import offpeak
from scheduling.models import OffPeakCalendar, WorkspaceCalendar


@dataclass(frozen=True)
class OffPeak:
    now: bool
    next_start: str  # "HH:MM UTC": in the platform's time zone, named; "" when there is no window


NEVER_OFF_PEAK = OffPeak(now=False, next_start="")


@dataclass(frozen=True)
class CalendarVersion:
    """What billing writes for one price version."""

    calendar: str
    effective_from: datetime
    windows: str
    time_zone: str = ""


def platform_calendar() -> str:
    """The calendar of work whose workspace follows none of its own: the platform's billing currency."""
    return settings.BILLING_CURRENCY


def month_of(at: datetime) -> date:
    """The first day of the month `at` falls in, in the platform's zone (as billing months are)."""
    return at.astimezone(offpeak.as_zone(settings.TIME_ZONE)).date().replace(day=1)


def calendar_off_peak(calendar: str, now: datetime) -> OffPeak:
    """Whether `now` is off-peak on `calendar`'s version in force, and when its next window opens."""
    version = (OffPeakCalendar.objects.filter(calendar=calendar, effective_from__lte=now)
               .order_by("-effective_from").first())
    windows = offpeak.parse_windows(version.windows) if version else offpeak.DEFAULT_OFFPEAK_WINDOWS
    if not windows:
        return NEVER_OFF_PEAK
    tz = offpeak.as_zone(settings.TIME_ZONE)
    windows_tz = offpeak.as_zone(version.time_zone) if version and version.time_zone else tz
    start = offpeak.next_offpeak_start(now, windows, windows_tz)
    return OffPeak(now=offpeak.is_offpeak(now, windows, windows_tz),
                   next_start=start.astimezone(tz).strftime("%H:%M %Z"))


def off_peak_at(now: datetime) -> OffPeak:
    """The platform calendar's answer: the one every job follows unless `job_off_peak_at` names its own."""
    return calendar_off_peak(platform_calendar(), now)


def workspace_calendars(workspace_ids: Iterable[int], at: datetime) -> dict[int, str]:
    """Workspace id -> the calendar it follows in the month of `at` (the platform's when it has none)."""
    ids = set(workspace_ids)
    rows: dict[int, tuple[list[date], list[str]]] = {}
    for workspace_id, period, calendar in (WorkspaceCalendar.objects.filter(workspace_id__in=ids)
                                           .order_by("workspace_id", "period")
                                           .values_list("workspace_id", "period", "calendar")):
        periods, calendars = rows.setdefault(workspace_id, ([], []))
        periods.append(period)
        calendars.append(calendar)
    month, platform = month_of(at), platform_calendar()
    found = {}
    for workspace_id in ids:
        periods, calendars = rows.get(workspace_id, ((), ()))
        index = bisect_right(periods, month)
        found[workspace_id] = calendars[index - 1] if index else platform
    return found


def job_off_peak_at(now: datetime, workspaces: dict[int, int]) -> dict[int, OffPeak]:
    """Job id -> its own OffPeak, for the jobs (of {job id: workspace id}) whose workspace follows
    another calendar than the platform's."""
    if not workspaces:
        return {}
    platform = platform_calendar()
    calendars = workspace_calendars(workspaces.values(), now)
    answers: dict[str, OffPeak] = {}
    found = {}
    for job_id, workspace_id in workspaces.items():
        calendar = calendars[workspace_id]
        if calendar == platform:
            continue
        if calendar not in answers:
            answers[calendar] = calendar_off_peak(calendar, now)
        found[job_id] = answers[calendar]
    return found


@transaction.atomic
def write_versions(versions: Iterable[CalendarVersion]) -> None:
    """Replace every calendar with `versions` (the price versions are few: they are written whole)."""
    OffPeakCalendar.objects.all().delete()
    OffPeakCalendar.objects.bulk_create(
        OffPeakCalendar(calendar=v.calendar, effective_from=v.effective_from, windows=v.windows,
                        time_zone=v.time_zone) for v in versions)


@transaction.atomic
def write_workspace_calendars(workspace_id: int, periods: Iterable[tuple[date, str]]) -> None:
    """Replace the calendars of one workspace with (first day of a month, calendar) pairs."""
    WorkspaceCalendar.objects.filter(workspace_id=workspace_id).delete()
    WorkspaceCalendar.objects.bulk_create(
        WorkspaceCalendar(workspace_id=workspace_id, period=period, calendar=calendar) for period, calendar in periods)
