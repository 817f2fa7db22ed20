"""Posting usage to the ledger.

A line is one job's held slice on one price (price table, off-peak or not, spot or not) in one
hour, on one node, priced on the timeline of the currency its workspace is billed in that month
(billing.currency). Its quantities are exact; its money columns are rounded once, here. Hours
before the cursor's `closed_until` are final and never recomputed; later ones are provisional and
rewritten whole on each post, so posting again never counts anything twice.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q

from billing import pricing
from billing.currency import Currencies
from billing.ledger import prices
from billing.metering.costs import replica_allocation
from billing.models import ChargeLine, LedgerCursor, LedgerRevision, PriceTable, StorageSample, UsageSample
from billing.time_zone import platform_tz
from scheduling.api import clock
from scheduling.models import Replica

log = logging.getLogger(__name__)
HOUR = timedelta(hours=1)
ZERO = Decimal(0)
SHARING_NAMES = {"whole": "exclusive"}  # the slice kind "whole" is what quotes call exclusive


def hour_floor(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


@dataclass
class _Draft:
    static: dict
    currency: str
    start: datetime
    end: datetime
    alloc: Decimal = ZERO
    used: Decimal = ZERO
    exclusive: Decimal = ZERO
    cpu: Decimal = ZERO
    mem: Decimal = ZERO
    cost: Decimal = ZERO
    list_cost: Decimal = ZERO
    exclusive_cost: Decimal = ZERO


@dataclass
class _Tables:
    """Every currency's timeline of price tables, and the stored row of each version."""

    priced: dict[str, list[pricing.PriceTable]]
    ids: dict[tuple[str, datetime], int] = field(default_factory=dict)

    @classmethod
    def load(cls) -> _Tables:
        rows = list(PriceTable.objects.prefetch_related("gpu_rates"))
        priced: dict[str, list[pricing.PriceTable]] = defaultdict(list)
        for row in rows:
            priced[row.currency].append(row.to_pricing())
        return cls(dict(priced), {(t.currency, t.effective_from.astimezone(UTC)): t.pk for t in rows})

    def of(self, currency: str) -> list[pricing.PriceTable]:
        tables = self.priced.get(currency)
        if not tables:
            raise ValueError(f"no {currency} price table: usage billed in {currency} cannot be priced")
        return tables

    def pk(self, table: pricing.PriceTable) -> int:
        return self.ids[(table.rates.currency, table.effective_from.astimezone(UTC))]


def _used_gpu_hours(replica_ids: Iterable[int], start: datetime, end: datetime) -> dict[tuple[int, datetime], Decimal]:
    """GPU-hours actually used per (replica, hour), from the agents' samples."""
    used: dict[tuple[int, datetime], Decimal] = defaultdict(Decimal)
    rows = UsageSample.objects.filter(ts__gte=start, ts__lt=end, replica_id__in=list(replica_ids),
                                      gpu_util_pct__isnull=False)
    for replica_id, ts, util, interval, scale in rows.values_list("replica_id", "ts", "gpu_util_pct", "interval_s",
                                                                   "replica__clock_scale"):
        seconds = Decimal(str(interval)) * Decimal(str(scale))
        used[(replica_id, hour_floor(ts))] += Decimal(str(util)) / 100 * seconds / 3600
    return used


def _held_replicas(start: datetime, end: datetime, job_ids: Iterable[int] | None):
    rows = (Replica.objects.filter(started__isnull=False, started__lt=end, node__isnull=False)
            .filter(Q(ended__isnull=True) | Q(ended__gt=start))
            .select_related("job", "job__queue", "job__submitted_by", "node__pool").order_by("pk"))
    return rows if job_ids is None else rows.filter(job_id__in=list(job_ids))


def _sku(pool, replica: Replica) -> str:
    profile = (replica.slice or {}).get("mig_profile")
    return f"{pool.gpu_model}/{profile}" if profile else pool.gpu_model


def _drafts(replicas, start: datetime, end: datetime, now: datetime, tables: _Tables) -> dict[tuple, _Draft]:
    tz = platform_tz()
    used = _used_gpu_hours([r.pk for r in replicas], start, end)
    currencies = Currencies({r.job.workspace_id for r in replicas})
    drafts: dict[tuple, _Draft] = {}
    for replica in replicas:
        job, pool = replica.job, replica.node.pool
        role = next((r for r in job.roles if r["name"] == replica.role), {})
        allocation = replica_allocation(replica, pool, role)
        gpus = len(replica.gpu_indices)
        scale = Decimal(str(replica.clock_scale))
        held_until = min(replica.ended or now, end, now)
        hour = max(hour_floor(replica.started), start)
        while hour < held_until:
            a, b = max(replica.started, hour), min(held_until, hour + HOUR)
            hour_used = used.get((replica.pk, hour), ZERO)
            if b > a:
                currency = currencies.of(job.workspace_id, hour.astimezone(tz).date().replace(day=1))
                _add_piece(drafts, replica, job, pool, allocation, gpus, scale, hour, a, b, hour_used,
                           tables.of(currency), tables.pk, tz)
            hour += HOUR
    return drafts


def _scaled(replica: Replica, at: datetime) -> datetime:
    """Simulated clusters run faster than the wall clock; billing counts their time."""
    return replica.started + (at - replica.started) * replica.clock_scale


def _real(replica: Replica, scaled: datetime) -> datetime:
    return replica.started + (scaled - replica.started) / replica.clock_scale


def _add_piece(drafts, replica, job, pool, allocation, gpus, scale, hour, a, b, hour_used, timeline, table_pk,
               tz) -> None:
    piece = pricing.HeldInterval(_scaled(replica, a), _scaled(replica, b), allocation, spot=pool.spot,
                                 by_deadline=prices.by_deadline(job), deadline_discount=pool.deadline_discount)
    priority = prices.billed_priority(job)
    segments = pricing.cost_for_intervals([piece], timeline, priority=priority, tz=tz).segments
    piece_hours = pricing.hours(piece.end - piece.start)
    sharing = (replica.slice or {}).get("kind", "whole")
    for seg in segments:
        rates, held = seg.table.rates, pricing.hours(seg.duration)
        key = (hour, job.pk, replica.node.name, pool.gpu_model, sharing, replica.slice_label, table_pk(seg.table),
               seg.offpeak, seg.spot)
        draft = drafts.get(key)
        if draft is None:
            submitter = job.submitted_by.get_username() if job.submitted_by else ""
            day = hour.astimezone(tz).date()
            vendor, model = (pool.vendor, pool.gpu_model) if allocation.share else ("", "")
            draft = drafts[key] = _Draft(static={
                "hour": hour, "day": day, "period": day.replace(day=1), "workspace_id": job.workspace_id,
                "queue": job.queue.name, "job_id": job.pk, "job_name": job.name, "submitter": submitter,
                "pool": pool.name, "node": replica.node.name, "vendor": vendor, "gpu_model": model,
                "sharing": SHARING_NAMES.get(sharing, sharing), "slice": replica.slice_label,
                "sku_id": _sku(pool, replica) if model else "", "price_table_id": table_pk(seg.table),
                "offpeak": seg.offpeak, "spot": seg.spot,
                "list_unit_price": rates.gpu_rate(vendor, model) if model else ZERO,
            }, currency=rates.currency, start=_real(replica, seg.start), end=_real(replica, seg.end))
        draft.start, draft.end = min(draft.start, _real(replica, seg.start)), max(draft.end, _real(replica, seg.end))
        draft.alloc += allocation.share * held
        draft.exclusive += prices.exclusive_share(gpus) * held
        draft.cpu += allocation.cpu_cores * held
        draft.mem += allocation.memory_gib * held
        draft.cost += seg.amount
        draft.list_cost += held * prices.list_hourly_price(rates, allocation, priority=priority)
        draft.exclusive_cost += held * prices.exclusive_hourly_price(rates, allocation, gpus, priority=priority)
        if piece_hours:
            draft.used += hour_used * held / piece_hours


def _line(draft: _Draft, *, provisional: bool, now: datetime) -> ChargeLine:
    def money(amount: Decimal) -> Decimal:  # the one rounding of a charge
        return pricing.quantize_money(amount, draft.currency)

    used = min(draft.used, draft.alloc)
    return ChargeLine(
        category=ChargeLine.Category.USAGE, resource=ChargeLine.Resource.COMPUTE, charge_start=draft.start,
        charge_end=draft.end, **draft.static,
        allocated_gpu_hours=draft.alloc, used_gpu_hours=used, idle_gpu_hours=draft.alloc - used,
        exclusive_gpu_hours=draft.exclusive, cpu_core_hours=draft.cpu, memory_gib_hours=draft.mem,
        exclusive_cost=money(draft.exclusive_cost), list_cost=money(draft.list_cost), cost=money(draft.cost),
        currency=draft.currency, provisional=provisional, computed_at=now,
    )


GIB = Decimal(2**30)


def _storage_lines(start: datetime, end: datetime, now: datetime, tables: _Tables, close_to: datetime) -> list[ChargeLine]:
    """Stored GiB: each sampled hour is billed on the bytes used then (the open hour up to now), one
    line per thing, hour and price table, its money rounded once here."""
    tz = platform_tz()
    samples = list(StorageSample.objects.filter(hour__gte=start, hour__lt=end).order_by("pk"))
    currencies = Currencies({s.workspace_id for s in samples})
    lines = []
    for sample in samples:
        hour = sample.hour.astimezone(UTC)
        day = hour.astimezone(tz).date()
        currency = currencies.of(sample.workspace_id, day.replace(day=1))
        if currency not in tables.priced:  # storage is no reason to stop posting everyone's usage
            log.warning("no %s price table: storage of workspace %s is not billed", currency, sample.workspace_id)
            continue
        used = pricing.PricedStorage(sample.storage_class, Decimal(sample.used_bytes) / GIB)
        for seg in pricing.storage_cost(used, hour, min(hour + HOUR, now), tables.of(currency), tz=tz):
            if not seg.gib_hours:  # nothing stored, nothing billed
                continue
            per_gib_month = seg.table.rates.storage_rate(sample.storage_class) or ZERO
            cost = pricing.quantize_money(seg.amount, currency)  # the one rounding of a charge
            lines.append(ChargeLine(
                category=ChargeLine.Category.USAGE, resource=ChargeLine.Resource.STORAGE, hour=hour, day=day,
                period=day.replace(day=1), charge_start=seg.start, charge_end=seg.end,
                workspace_id=sample.workspace_id, sku_id=f"storage/{sample.storage_class}",
                resource_name=f"{sample.kind}/{sample.name}", price_table_id=tables.pk(seg.table),
                list_unit_price=per_gib_month, storage_gib_hours=seg.gib_hours,
                # no discount and no sharing: what is billed is the list and the exclusive price too
                cost=cost, list_cost=cost, exclusive_cost=cost, currency=currency, provisional=hour >= close_to,
                computed_at=now))
    return lines


def _cursor() -> LedgerCursor:
    try:
        with transaction.atomic():
            return LedgerCursor.objects.select_for_update().get_or_create(pk=1)[0]
    except IntegrityError:  # another process made it first
        return LedgerCursor.objects.select_for_update().get(pk=1)


@dataclass(frozen=True)
class Posted:
    lines: int
    closed_until: datetime | None
    workspace_ids: frozenset[int]


def close_grace() -> timedelta:
    """How long after an hour ends its lines wait for late usage before they are final."""
    return timedelta(seconds=settings.LEDGER_CLOSE_GRACE_S)


@transaction.atomic
def post_ledger(*, now: datetime | None = None, job_ids: Iterable[int] | None = None) -> Posted:
    """Recompute every open hour's lines (of `job_ids` only, when given) up to `now`, and make the
    hours that ended more than the grace ago final. Posts are serialised by the cursor's row lock."""
    now = now or clock.now()
    cursor = _cursor()
    tables = _Tables.load()
    start = cursor.closed_until
    if start is None:
        first = Replica.objects.filter(started__isnull=False).order_by("started").values_list("started", flat=True)
        sampled = StorageSample.objects.order_by("hour").values_list("hour", flat=True)
        start = hour_floor(min([now, *first[:1], *sampled[:1]]))
    end = hour_floor(now) + HOUR
    close_to = max(start, hour_floor(now - close_grace()))
    if not tables.priced:
        log.warning("no price table: usage is not posted to the ledger")
        return Posted(0, cursor.closed_until, frozenset())
    scoped = job_ids is not None
    replicas = list(_held_replicas(start, end, job_ids))
    drafts = _drafts(replicas, start, end, now, tables)
    stale = ChargeLine.objects.filter(category=ChargeLine.Category.USAGE, provisional=True, hour__gte=start)
    if scoped:
        stale = stale.filter(job_id__in=list(job_ids))
    touched = set(stale.values_list("workspace_id", flat=True).distinct())
    stale.delete()
    lines = [_line(d, provisional=scoped or d.static["hour"] >= close_to, now=now) for d in drafts.values()]
    if not scoped:  # stored GiB belong to no job: a job's post leaves them as they are
        lines += _storage_lines(start, end, now, tables, close_to)
    ChargeLine.objects.bulk_create(lines, batch_size=1000)
    LedgerRevision.bump()
    if not scoped:
        cursor.closed_until = close_to
        cursor.posted_until = max(now, cursor.posted_until or now)
        cursor.save(update_fields=["closed_until", "posted_until"])
    return Posted(len(lines), cursor.closed_until, frozenset(touched | {line.workspace_id for line in lines}))
