"""Ledger lines made by a factory (the ledger's own posting is tested elsewhere): a USD and a CNY
workspace's lines on chosen days, so consolidated figures can be worked out by hand."""

from datetime import UTC, date, datetime, time
from decimal import Decimal

import factory
import pytest
from factory.django import DjangoModelFactory

from billing.models import ChargeLine


class ChargeLineFactory(DjangoModelFactory):
    class Meta:
        model = ChargeLine

    category = ChargeLine.Category.USAGE
    resource = ChargeLine.Resource.COMPUTE
    day = date(2026, 3, 2)
    hour = factory.LazyAttribute(lambda o: datetime.combine(o.day, time(10), tzinfo=UTC))
    period = factory.LazyAttribute(lambda o: o.day.replace(day=1))
    charge_start = factory.LazyAttribute(lambda o: o.hour)
    charge_end = factory.LazyAttribute(lambda o: o.hour.replace(minute=59))
    computed_at = factory.LazyAttribute(lambda o: o.charge_end)
    provisional = False
    pool = "h100"
    node = "h100-01"
    vendor = "nvidia"
    gpu_model = "H100-80GB"
    sharing = "exclusive"
    slice = "1 GPU"
    sku_id = "H100-80GB"
    allocated_gpu_hours = Decimal(1)
    used_gpu_hours = Decimal("0.8")
    exclusive_gpu_hours = Decimal(1)
    list_unit_price = Decimal("3.0000")
    cost = Decimal("3.00")
    list_cost = factory.LazyAttribute(lambda o: o.cost)
    exclusive_cost = factory.LazyAttribute(lambda o: o.cost)
    currency = "USD"


@pytest.fixture
def line():
    return ChargeLineFactory
