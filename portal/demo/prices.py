"""Demo prices, idempotent: the USD table most workspaces are billed on, and a CNY table with a
valley-electricity (谷电) off-peak window in Asia/Shanghai, the ai-lab team's (portal/demo/chinese.py)."""

import dataclasses
from datetime import UTC, datetime
from decimal import Decimal

from django.db import transaction

from billing.api import pricing
from billing.models import AMOUNT_FIELDS, GpuRate, PriceTable, StorageRate
from scheduling.api import parse_windows

SINCE = datetime(2020, 1, 1, tzinfo=UTC)
CNY_NAME = "演示价目表（人民币，谷电 23:00–07:00）"
CNY_WINDOWS = "23:00-07:00"
CNY_ZONE = "Asia/Shanghai"


def usd_rates() -> pricing.Rates:
    """The demo price list (USD)."""
    return pricing.Rates(
        currency="USD",
        gpu={("nvidia", "H100-80GB"): Decimal("3.00"), ("nvidia", "A100-80GB"): Decimal("1.80"),
             ("nvidia", "L40S-48GB"): Decimal("1.00"), ("nvidia", "RTX-4090-24GB"): Decimal("0.40"),
             ("amd", "MI300X-192GB"): Decimal("2.10")},
        cpu_core_hour=Decimal("0.02"), memory_gib_hour=Decimal("0.005"),
        storage={"standard": Decimal("0.10")},  # per GiB-month used
    )


def cny_rates() -> pricing.Rates:
    """The demo list in yuan: about 7.2 yuan to the dollar, half off in the valley hours."""
    return dataclasses.replace(
        usd_rates(), currency="CNY",
        gpu={("nvidia", "H100-80GB"): Decimal("21.60"), ("nvidia", "A100-80GB"): Decimal("13.00"),
             ("nvidia", "L40S-48GB"): Decimal("7.20"), ("nvidia", "RTX-4090-24GB"): Decimal("2.90"),
             ("amd", "MI300X-192GB"): Decimal("15.10")},
        cpu_core_hour=Decimal("0.15"), memory_gib_hour=Decimal("0.036"), storage={"standard": Decimal("0.72")},
        offpeak_windows=parse_windows(CNY_WINDOWS), offpeak_time_zone=CNY_ZONE, offpeak_discount=Decimal("0.50"))


def _table(name: str, rates: pricing.Rates, windows: str) -> None:
    table, created = PriceTable.objects.get_or_create(
        currency=rates.currency, effective_from=SINCE,
        defaults={"name": name, "offpeak_windows": windows, "offpeak_time_zone": rates.offpeak_time_zone,
                  **{field: getattr(rates, field) for field in AMOUNT_FIELDS}},
    )
    if created:
        GpuRate.objects.bulk_create(
            GpuRate(table=table, vendor=vendor, gpu_model=model, per_gpu_hour=price)
            for (vendor, model), price in rates.gpu.items()
        )
        StorageRate.objects.bulk_create(StorageRate(table=table, storage_class=storage_class, per_gib_month=price)
                                        for storage_class, price in rates.storage.items())


@transaction.atomic
def load_prices() -> None:
    _table("Demo prices", usd_rates(), "00:00-08:00")
    _table(CNY_NAME, cny_rates(), CNY_WINDOWS)
