"""Hourly rollups per job: allocated vs used GPU-hours, CPU and memory hours, and cost.

Recomputed from the placements and samples of the hours asked for and written over what was
there, so a rollup can be re-run for any past hour without counting anything twice.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.db.models import Q

from billing import pricing
from billing.metering.costs import replica_allocation
from billing.models import UsageHour, UsageSample
from billing.selectors import price_tables
from billing.services import platform_tz
from scheduling import clock
from scheduling.models import Replica

HOUR = timedelta(hours=1)
ZERO = Decimal(0)


def hour_floor(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def _scaled(replica: Replica, at: datetime) -> datetime:
    """Simulated clusters run faster than the wall clock; billing counts their time."""
    return replica.started + (at - replica.started) * replica.clock_scale


def _used_gpu_hours(start: datetime, end: datetime) -> dict[tuple[int, datetime], Decimal]:
    """GPU-hours actually used per (replica, hour), from the agents' per-replica samples."""
    used: dict[tuple[int, datetime], Decimal] = defaultdict(Decimal)
    rows = UsageSample.objects.filter(ts__gte=start, ts__lt=end, replica__isnull=False, gpu_util_pct__isnull=False)
    for replica_id, ts, util, interval, scale in rows.values_list("replica_id", "ts", "gpu_util_pct", "interval_s",
                                                                   "replica__clock_scale"):
        seconds = Decimal(str(interval)) * Decimal(str(scale))
        used[(replica_id, hour_floor(ts))] += Decimal(str(util)) / 100 * seconds / 3600
    return used


@transaction.atomic
def rollup_hours(start: datetime, end: datetime) -> int:
    """Recompute every job-hour between `start` and `end` (whole hours). Returns rows written."""
    start, end = hour_floor(start), hour_floor(end - timedelta(microseconds=1)) + HOUR
    tables, tz = price_tables(), platform_tz()
    used = _used_gpu_hours(start, end)
    totals: dict[tuple, dict] = {}
    replicas = (Replica.objects.filter(started__isnull=False, started__lt=end, node__isnull=False)
                .filter(Q(ended__isnull=True) | Q(ended__gt=start)).select_related("job", "node__pool"))
    now = clock.now()
    for replica in replicas:
        job, pool = replica.job, replica.node.pool
        role = next((r for r in job.roles if r["name"] == replica.role), {})
        allocation = replica_allocation(replica, pool, role)
        held_until = min(replica.ended or now, end)
        hour = max(hour_floor(replica.started), start)
        while hour < held_until:
            a, b = max(replica.started, hour), min(held_until, hour + HOUR)
            if b > a:
                piece = pricing.HeldInterval(_scaled(replica, a), _scaled(replica, b), allocation, spot=pool.spot)
                cost = pricing.cost_for_intervals([piece], tables, priority=job.priority, tz=tz)
                hours = pricing.hours(piece.end - piece.start)
                key = (hour, job.pk, pool.gpu_model, (replica.slice or {}).get("kind", "whole"))
                row = totals.setdefault(key, {"workspace_id": job.workspace_id, "queue": job.queue.name,
                                              "alloc": ZERO, "cpu": ZERO, "mem": ZERO, "cost": ZERO,
                                              "used": ZERO, "currency": cost.currency})
                row["alloc"] += allocation.share * hours
                row["cpu"] += allocation.cpu_cores * hours
                row["mem"] += allocation.memory_gib * hours
                row["cost"] += sum((s.amount for s in cost.segments), ZERO)
                row["used"] += used.get((replica.pk, hour), ZERO)
            hour += HOUR
    UsageHour.objects.filter(hour__gte=start, hour__lt=end).delete()
    UsageHour.objects.bulk_create([
        UsageHour(hour=hour, job_id=job_id, workspace_id=row["workspace_id"], queue=row["queue"], gpu_model=model,
                  sharing=sharing, allocated_gpu_hours=row["alloc"], used_gpu_hours=row["used"],
                  cpu_core_hours=row["cpu"], memory_gib_hours=row["mem"], cost=row["cost"],
                  currency=row["currency"])
        for (hour, job_id, model, sharing), row in totals.items()
    ])
    return len(totals)


def purge_samples(older_than_days: int, *, now: datetime) -> int:
    deleted, _ = UsageSample.objects.filter(ts__lt=now - timedelta(days=older_than_days)).delete()
    return deleted
