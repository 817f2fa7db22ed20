"""Billing's figures for Prometheus, computed from the database at scrape time (the portal's /metrics
reads them): busy GPUs from recent usage samples, how late samples arrive, budget use per workspace."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Q
from prometheus_client import Counter

from billing.currency import workspace_currencies
from billing.models import Budget, UsageSample
from billing.reports.services import spent_in_period
from scheduling.api import LOCAL, USED_WINDOW, ClusterFigures, clock, cluster_figures

LAG_WINDOW = timedelta(minutes=5)

# Ingest runs in the web process: these live there and each replica serves its own.
SAMPLES_INGESTED = Counter("gpu_platform_usage_samples_ingested", "Usage samples stored.", registry=LOCAL)
SAMPLES_REFUSED = Counter("gpu_platform_usage_samples_refused", "Usage samples refused as invalid.", registry=LOCAL)


def count_ingest(result) -> None:
    """After one batch (a metering.ingest.IngestResult)."""
    SAMPLES_INGESTED.inc(len(result.accepted))
    SAMPLES_REFUSED.inc(len(result.rejected))


def gpu_figures(now: datetime | None = None) -> ClusterFigures:
    """The cluster's figures with `used` filled in: the GPUs held by replicas that a sample from the last
    USED_WINDOW showed busy (utilisation above 0, or memory in use where utilisation is unknown)."""
    now = now or clock.now()
    figures = cluster_figures(now)
    busy = set(UsageSample.objects.filter(ts__gte=now - USED_WINDOW).filter(
        Q(gpu_util_pct__gt=0) | Q(gpu_util_pct=None, mem_used_mib__gt=0)).values_list("node_id", "gpu_index").distinct())
    for spot, held in figures.held.items():
        if spot in busy:
            pool = figures.held_pool[spot]
            figures.used[pool] += min(held, 1.0)
    return figures


def ingest_lag_seconds(now: datetime | None = None) -> float:
    """The longest delay between a sample's measurement and its arrival, over samples received in the
    last LAG_WINDOW (0 when none arrived)."""
    now = now or clock.now()
    lags = [(received - ts).total_seconds() for ts, received in UsageSample.objects.filter(
        received__gte=now - LAG_WINDOW).order_by("-received").values_list("ts", "received")[:5000]]
    return max([0.0, *lags])


def budget_figures(now: datetime | None = None) -> list[tuple[str, str, float, float]]:
    """(workspace slug, currency, budget amount, spent this month) for every workspace with a usable budget."""
    now = now or clock.now()
    out = []
    budgets = list(Budget.objects.select_related("workspace"))
    billed_in = workspace_currencies([b.workspace_id for b in budgets], at=now)
    for budget in budgets:
        if not (budget.amount.is_finite() and budget.amount > 0) or budget.currency != billed_in[budget.workspace_id]:
            continue
        spent = spent_in_period(budget.workspace, now=now)
        out.append((budget.workspace.slug, budget.currency, float(budget.amount), float(spent)))
    return out
