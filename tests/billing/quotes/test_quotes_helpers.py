"""Shared inputs for the quote tests: the seed's task YAML and the demo pools as PoolOffers.

Imported by the other test_quotes_* modules (no tests here).
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from billing.quotes import PoolOffer
from scheduling.spec.examples import SEED_YAML  # noqa: F401 - the quote tests import it from here

UTC_ZONE = ZoneInfo("UTC")
PEAK = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)  # a Monday, 10:00: peak (off-peak is 00:00-08:00)
OFFPEAK = datetime(2026, 3, 2, 3, 0, tzinfo=UTC)

GIB = 1024
WHOLE = frozenset({"exclusive", "fraction"})


def demo_pool_offers(*, with_totals: bool = True, **free_milli: int) -> list[PoolOffer]:
    """The demo pools (nodes x GPUs). ``with_totals`` gives each pool its GPU count;
    ``free_milli`` sets free capacity now per pool name (``a100_spot=2000``), default unknown."""

    def pool(name: str, nodes: int, gpus: int, vendor: str, model: str, mem_gib: int, **extra) -> PoolOffer:
        return PoolOffer(
            name=name,
            vendor=vendor,
            gpu_model=model,
            gpu_memory_mib=mem_gib * GIB,
            gpus_per_node=gpus,
            total_gpus=nodes * gpus if with_totals else None,
            free_milli_now=free_milli.get(name.replace("-", "_")),
            **extra,
        )

    return [
        pool("h100", 2, 8, "nvidia", "H100-80GB", 80, sharing_modes=WHOLE),
        pool(
            "h100-mig",
            1,
            8,
            "nvidia",
            "H100-80GB",
            80,
            sharing_modes=frozenset({"mig"}),
            mig_profiles=frozenset({"3g.40gb", "2g.20gb", "1g.10gb"}),
        ),
        pool("a100-spot", 4, 8, "nvidia", "A100-80GB", 80, sharing_modes=WHOLE, spot=True),
        pool(
            "l40s-shared",
            2,
            4,
            "nvidia",
            "L40S-48GB",
            48,
            sharing_modes=frozenset({"timeslice"}),
            timeslice_replicas=4,
        ),
        pool("rtx4090", 4, 2, "nvidia", "RTX-4090-24GB", 24, sharing_modes=WHOLE),
        pool("mi300x", 1, 8, "amd", "MI300X-192GB", 192, sharing_modes=WHOLE),
    ]
