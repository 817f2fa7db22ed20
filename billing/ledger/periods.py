"""Billing months in the platform's time zone: budgets, statements and exports share them."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from billing.time_zone import platform_tz


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
