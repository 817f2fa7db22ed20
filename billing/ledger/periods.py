"""Billing months in the platform's time zone: budgets, statements and exports share them."""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta

from billing.time_zone import platform_tz

FIRST_YEAR, LAST_YEAR = 1970, 2100  # dates outside are a client's mistake (and overflow date arithmetic)
MONTH_PATTERN = r"^(19[7-9][0-9]|20[0-9][0-9]|2100)-(0[1-9]|1[0-2])$"  # what parse_month takes, for API schemas
_MONTH = re.compile(r"([0-9]{4})-(0[1-9]|1[0-2])")


class MonthError(ValueError):
    """Not a month written YYYY-MM, or one outside FIRST_YEAR to LAST_YEAR; callers say it their own way."""


def parse_month(raw: str | None) -> date:
    """"YYYY-MM" as the month's first day; MonthError otherwise."""
    match = _MONTH.fullmatch(raw) if isinstance(raw, str) else None
    if match is None:
        raise MonthError(f"{raw!r} is not a month (YYYY-MM)")
    year = int(match[1])
    if not FIRST_YEAR <= year <= LAST_YEAR:
        raise MonthError(f"{raw!r} is not between {FIRST_YEAR} and {LAST_YEAR}")
    return date(year, int(match[2]), 1)


def period_start(at: datetime) -> date:
    """The first day of the billing month `at` falls in."""
    return at.astimezone(platform_tz()).date().replace(day=1)


def month_after(month: date) -> date:
    return (month.replace(day=28) + timedelta(days=4)).replace(day=1)


def month_end(month: date) -> date:
    """The last day of `month`."""
    return month_after(month) - timedelta(days=1)


def period_bounds(month: date) -> tuple[datetime, datetime]:
    """The month's first and the next month's first instant, at midnight in the platform's zone."""
    tz = platform_tz()
    return datetime.combine(month, time(0), tzinfo=tz), datetime.combine(month_after(month), time(0), tzinfo=tz)
