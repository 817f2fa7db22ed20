"""The demo's finance settings, idempotent: a USD/CNY rate for every recent day (so ai-lab's yuan consolidate
into dollars, and chargeback counts them), and a chargeback policy on every demo pool (so the idle capacity
of the demo month is charged to the workspaces, and direct cost plus idle shares is the priced capacity)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.db import transaction

from billing.api import chargeback, exchange_rates
from billing.models import ExchangeRate
from portal.demo.cluster import DEMO_POOLS
from scheduling.models import NodePool

RATE_DAYS = 92  # a quarter back: the demo month and the month before it
USD_CNY = Decimal("7.1800")
# pool -> policy; the rest proportional (by each workspace's allocated GPU-hours in the pool)
POLICIES = {"mi300x": "by-quota"}


def demo_rate(day) -> Decimal:
    """About 7.18 yuan to the dollar, moving a little from day to day (the same day, the same rate)."""
    return USD_CNY + Decimal((day.toordinal() * 37) % 41 - 20) / 1000


@transaction.atomic
def load_exchange_rates(days: int = RATE_DAYS) -> int:
    """USD->CNY for each of the last `days` days up to today that has none yet. Returns how many it stored."""
    today = exchange_rates.today()
    known = set(ExchangeRate.objects.filter(base="USD", quote="CNY", day__gte=today - timedelta(days=days))
                .values_list("day", flat=True))
    stored = 0
    for back in range(days, -1, -1):
        day = today - timedelta(days=back)
        if day not in known:
            exchange_rates.add_rate(base="USD", quote="CNY", day=day, rate=demo_rate(day), source="demo")
            stored += 1
    return stored


@transaction.atomic
def load_chargeback_policies() -> None:
    for pool in NodePool.objects.filter(name__in=list(DEMO_POOLS)):
        if not hasattr(pool, "chargeback"):
            chargeback.save_policy(pool, POLICIES.get(pool.name, "proportional"))
