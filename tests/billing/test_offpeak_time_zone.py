"""A price table reads its off-peak windows in its own zone (valley electricity in Asia/Shanghai on
a platform in UTC); without one, in the platform's zone as before."""

import dataclasses
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from billing import pricing
from billing.models import PriceTable
from scheduling.offpeak import parse_windows
from tests.world import world_rates

H100 = pricing.Allocation(share=Decimal(1), vendor="nvidia", gpu_model="H100-80GB")
# 20:00 UTC is 04:00 in Shanghai: inside a 00:00-08:00 valley window there, outside it in UTC
AT = datetime(2026, 11, 24, 20, 0, tzinfo=UTC)


def rates(zone: str) -> pricing.Rates:
    return dataclasses.replace(world_rates(), currency="CNY", offpeak_windows=parse_windows("00:00-08:00"),
                               offpeak_time_zone=zone)


def test_the_windows_are_read_in_the_tables_zone():
    shanghai = pricing.estimate(rates("Asia/Shanghai"), H100, start=AT, duration=timedelta(hours=1), tz="UTC")
    platform = pricing.estimate(rates(""), H100, start=AT, duration=timedelta(hours=1), tz="UTC")
    assert shanghai.offpeak == timedelta(hours=1) and shanghai.peak == timedelta(0)
    assert platform.peak == timedelta(hours=1) and platform.offpeak == timedelta(0)
    assert shanghai.total < platform.total and shanghai.currency == "CNY"


def test_an_unknown_zone_is_refused(db):
    with pytest.raises(ValueError):
        rates("Mars/Olympus")
    table = PriceTable(name="valley", currency="CNY", effective_from=datetime(2030, 1, 1, tzinfo=UTC),
                       cpu_core_hour=Decimal("0.1"), memory_gib_hour=Decimal("0.01"), offpeak_time_zone="Mars/Olympus")
    with pytest.raises(ValidationError) as refused:
        table.full_clean()
    assert "offpeak_time_zone" in refused.value.message_dict
