"""Reads for pricing: a currency's price tables and what each pool offers right now."""

from __future__ import annotations

import logging
from collections import defaultdict

from django.db.models import Prefetch

from billing import pricing
from billing.currency import default_currency
from billing.faults import exception_once
from billing.models import GpuRate, PriceTable
from billing.pricing import table_in_force
from billing.quotes import Note, PoolOffer
from scheduling.api import (
    MILLI_PER_GPU,
    PoolGpus,
    clock,
    gpu_model_name,
    pool_domain_gpus,
    pool_gpu_counts,
    vendor_name,
)
from scheduling.models import JobState, NodePool, Replica

logger = logging.getLogger(__name__)

def price_tables(currency: str | None = None) -> list[pricing.PriceTable]:
    """The versions of one currency's timeline (default: the platform's billing currency)."""
    tables = PriceTable.objects.filter(currency=currency or default_currency()).prefetch_related(
        Prefetch("gpu_rates", queryset=GpuRate.objects.all()))
    return [table.to_pricing() for table in tables]


def price_currencies() -> list[str]:
    """The currencies with a price timeline, the platform's first (it alone when there is none)."""
    platform = default_currency()
    others = PriceTable.objects.exclude(currency=platform).order_by("currency").values_list("currency", flat=True)
    return [platform, *dict.fromkeys(others)]


def _held_milli_by_pool() -> dict[int, int]:
    """GPU milli held by replicas that are scheduled or running, per pool."""
    held: dict[int, int] = defaultdict(int)
    replicas = Replica.objects.filter(state__in=[JobState.SCHEDULED, JobState.RUNNING], node__isnull=False)
    for pool_id, slice_, gpus in replicas.values_list("node__pool_id", "slice", "gpu_indices"):
        held[pool_id] += int((slice_ or {}).get("gpu_milli", MILLI_PER_GPU)) * len(gpus or ())  # per GPU held
    return held


def pool_offers() -> list[PoolOffer]:
    """Every pool's offer; a pool whose offer cannot be built (a row the quote refuses) is left out,
    so one bad pool never fails every quote, and logged once per cause."""
    held = _held_milli_by_pool()
    counts = pool_gpu_counts()
    domains = pool_domain_gpus()
    offers = []
    for pool in NodePool.objects.order_by("name"):
        gpus = counts.get(pool.pk, PoolGpus(0, 0))
        try:
            offers.append(PoolOffer(
                name=pool.name, vendor=vendor_name(pool.vendor), gpu_model=gpu_model_name(pool.gpu_model),
                gpu_memory_mib=pool.gpu_memory_mib,
                gpus_per_node=gpus.most_per_node, sharing_modes=pool.sharing_modes,
                mig_profiles=frozenset(pool.mig_layout or ()), timeslice_replicas=pool.timeslice_replicas,
                spot=pool.spot, free_milli_now=max(0, gpus.total * MILLI_PER_GPU - held[pool.pk]),
                total_gpus=gpus.total, topology=domains.get(pool.pk, ()), deadline_discount=pool.deadline_discount,
            ))
        except Exception as error:  # noqa: BLE001 (any fault of one pool's row leaves that pool out)
            exception_once(logger, ("pool offer", pool.name, type(error).__name__),
                           "pool %s is left out of quotes: its offer cannot be built", pool.name)
    return offers


def pool_problems(now=None) -> dict[str, list[Note]]:
    """Per pool name, why quotes leave it out whatever the job: `pool_has_no_nodes` (no GPU node has
    joined it) and `pool_not_priced` (the price tables in force in these currencies have no rate for its
    GPUs: workspaces billed in them are never offered it). Pools without a problem are absent."""
    now = now or clock.now()
    in_force = {}
    for currency in price_currencies():
        try:
            in_force[currency] = table_in_force(price_tables(currency), now).rates
        except ValueError:  # no table in force yet: that currency prices nothing
            in_force[currency] = None
    counts = pool_gpu_counts()
    problems: dict[str, list[Note]] = {}
    for pool in NodePool.objects.order_by("name"):
        notes = []
        if not counts.get(pool.pk, PoolGpus(0, 0)).total:
            notes.append(Note("pool_has_no_nodes", {"pool": pool.name}))
        unpriced = [currency for currency, rates in in_force.items() if not _prices(rates, pool)]
        if unpriced:
            notes.append(Note("pool_not_priced", {"pool": pool.name, "currencies": unpriced,
                                                  "vendor": vendor_name(pool.vendor),
                                                  "gpu_model": gpu_model_name(pool.gpu_model)}))
        if notes:
            problems[pool.name] = notes
    return problems


def _prices(rates, pool: NodePool) -> bool:
    if rates is None:
        return False
    try:
        rates.gpu_rate(vendor_name(pool.vendor), gpu_model_name(pool.gpu_model))
    except ValueError:
        return False
    return True
