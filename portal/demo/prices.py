"""Demo prices (USD), idempotent."""

from datetime import UTC, datetime

from django.db import transaction

from billing import pricing
from billing.models import GpuRate, PriceTable


@transaction.atomic
def load_prices() -> None:
    demo = pricing.demo_price_table(effective_from=datetime(2020, 1, 1, tzinfo=UTC))
    rates = demo.rates
    table, created = PriceTable.objects.get_or_create(
        effective_from=demo.effective_from,
        defaults={"name": "Demo prices", "currency": rates.currency, "cpu_core_hour": rates.cpu_core_hour,
                  "memory_gib_hour": rates.memory_gib_hour},
    )
    if created:
        GpuRate.objects.bulk_create(
            GpuRate(table=table, vendor=vendor, gpu_model=model, per_gpu_hour=price)
            for (vendor, model), price in rates.gpu.items()
        )
