"""Billing writes the off-peak calendar the scheduler reads: a version per price table under its currency,
and each workspace's currency as its calendar; the scheduler asks billing nothing."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from billing.currency import set_workspace_currency
from scheduling import offpeak_calendar, signals
from scheduling.models import OffPeakCalendar, WorkspaceCalendar
from tests.factories import PriceTableFactory

pytestmark = pytest.mark.django_db


def at(hour: int, day: int = 2) -> datetime:
    return datetime(2026, 3, day, hour, tzinfo=UTC)


def cny_table(**fields):
    return PriceTableFactory(name="CNY", currency="CNY", cpu_core_hour=Decimal("0.15"), memory_gib_hour=Decimal("0.036"),
                             offpeak_windows="23:00-07:00", offpeak_time_zone="Asia/Shanghai", **fields)


def test_each_price_version_is_a_version_of_its_currencys_calendar(cluster):
    table = cny_table()
    assert list(OffPeakCalendar.objects.values_list("calendar", "windows", "time_zone")) == [
        ("CNY", "23:00-07:00", "Asia/Shanghai"), ("USD", "00:00-08:00", "")]
    table.offpeak_windows = "22:00-06:00"
    table.save()
    assert OffPeakCalendar.objects.get(calendar="CNY").windows == "22:00-06:00"
    table.delete()
    assert list(OffPeakCalendar.objects.values_list("calendar", flat=True)) == ["USD"]


def test_the_platform_calendar_answers_for_every_job_and_a_workspaces_own_for_its_jobs(cluster, clock, settings):
    settings.TIME_ZONE = "UTC"
    clock.now = at(14)
    cny_table()
    set_workspace_currency(cluster.nlp, "CNY", user=cluster.admin)
    assert list(WorkspaceCalendar.objects.values_list("workspace_id", "calendar")) == [(cluster.nlp.pk, "CNY")]
    platform = offpeak_calendar.off_peak_at(at(14))  # 14:00 UTC: peak; 00:00-08:00 opens at midnight
    assert (platform.now, platform.next_start) == (False, "00:00 UTC")
    own = offpeak_calendar.job_off_peak_at(at(16), {1: cluster.nlp.pk, 2: cluster.vision.pk})
    assert set(own) == {1} and own[1].now  # 16:00 UTC is 00:00 in Shanghai


def test_without_a_version_a_calendar_has_the_default_window(db):
    assert not OffPeakCalendar.objects.exists()
    assert offpeak_calendar.off_peak_at(at(3)).now and not offpeak_calendar.off_peak_at(at(9)).now


def test_no_signal_asks_the_layers_above_for_off_peak_hours():
    assert not hasattr(signals, "off_peak_asked") and not hasattr(signals, "job_off_peak_asked")
