"""What capacity costs and who uses it, read from the ledger's lines (operators' Capacity page, and
each workspace's forecast beside its budget).

- Idle allocated GPU-hours: each usage line's `idle_gpu_hours` (held minus used, from the agents'
  samples); their cost is each line's billed cost times its idle share (idle / allocated), summed
  per row and rounded once there.
- Unallocated GPU-hours of a pool in an hour: its GPUs now (every node of the pool, cordoned or not
  ready included: capacity that is there to be paid for) minus the GPU-hours its usage lines
  allocated in that hour, never below zero; priced at list (the peak, on-demand price per GPU-hour of
  the pool's model in the table in force that hour), once per currency with a price timeline, since
  unused capacity is no workspace's (an hour whose table prices no such model counts its GPU-hours
  without a price). Past node counts are not kept: a pool that grew
  or shrank is counted at today's size. A simulated cluster's lines count its fast clock, so they may
  allocate more than the hour held.
- Usage by submitter: a workspace's lines grouped by the user who submitted each job.
- Idle GPU-hours per person: every workspace's usage lines grouped by the person who submitted each job.
- Month-end forecast: what the workspace spent this month plus its usage cost per day over the last 7
  complete days (fewer for a workspace billed for less long) times the days left in the month.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

from django.db.models import Count, Min

from billing import pricing
from billing.ledger.periods import month_after, period_start
from billing.ledger.selectors import money_sum, workspace_currency
from billing.models import Budget, ChargeLine
from billing.quote_texts import pool_problem_text
from billing.reports.selectors import RENDERED, _sums
from billing.reports.services import budget_status, day_bounds, spent_in_period
from billing.selectors import price_currencies, price_tables
from billing.time_zone import platform_tz
from scheduling.models import NodePool

ZERO = Decimal(0)
HOUR = timedelta(hours=1)
QUANTITY = Decimal("0.000001")
FORECAST_DAYS = 7


def idle_cost(cost: Decimal, allocated: Decimal, idle: Decimal) -> Decimal:
    """A usage line's billed cost times its idle share (idle / allocated), unrounded: summed first."""
    return cost * idle / allocated if allocated > 0 else ZERO


def _usage(start: date, end: date):
    return ChargeLine.objects.filter(category=ChargeLine.Category.USAGE, day__gte=start, day__lte=end)


# --------------------------------------------------------------------------- idle allocated GPU-hours


class IdleShare:
    """What is idle of what was allocated, in percent."""

    allocated_gpu_hours: Decimal
    idle_gpu_hours: Decimal

    @property
    def idle_percent(self) -> Decimal:
        if not self.allocated_gpu_hours:
            return ZERO
        return (self.idle_gpu_hours * 100 / self.allocated_gpu_hours).quantize(Decimal("0.1"))


@dataclass(frozen=True)
class IdleRow(IdleShare):
    day: date
    workspace: str
    pool: str
    allocated_gpu_hours: Decimal
    idle_gpu_hours: Decimal
    idle_cost: Decimal
    currency: str


def idle_by_workspace_pool_day(start: date, end: date) -> list[IdleRow]:
    """Per day, workspace and pool: GPU-hours allocated, those idle, and the cost of the idle ones."""
    sums: dict[tuple, list] = {}
    lines = _usage(start, end).filter(allocated_gpu_hours__gt=0).values_list(
        "day", "workspace__slug", "pool", "currency", "allocated_gpu_hours", "idle_gpu_hours", "cost")
    for day, workspace, pool, currency, allocated, idle, cost in lines.iterator():
        row = sums.setdefault((day, workspace, pool, currency), [ZERO, ZERO, ZERO])
        row[0] += allocated
        row[1] += idle
        row[2] += idle_cost(cost, allocated, idle)
    return [IdleRow(day, workspace, pool, a.quantize(QUANTITY), i.quantize(QUANTITY),
                    pricing.quantize_money(c, currency), currency)
            for (day, workspace, pool, currency), (a, i, c) in sorted(sums.items())]


@dataclass(frozen=True)
class PersonIdleRow(IdleShare):
    person: str
    workspaces: tuple[str, ...]
    allocated_gpu_hours: Decimal
    idle_gpu_hours: Decimal
    idle_cost: Decimal
    currency: str


def idle_by_person(start: date, end: date) -> list[PersonIdleRow]:
    """Per person who submitted the jobs (the line's submitter when the user is gone): GPU-hours allocated,
    those idle and their cost, most idle first."""
    sums: dict[tuple, list] = {}
    lines = _usage(start, end).filter(allocated_gpu_hours__gt=0).annotate(person=RENDERED["submitted_by"]).values_list(
        "person", "workspace__slug", "currency", "allocated_gpu_hours", "idle_gpu_hours", "cost")
    for person, workspace, currency, allocated, idle, cost in lines.iterator():
        row = sums.setdefault((person or "", currency), [ZERO, ZERO, ZERO, set()])
        row[0] += allocated
        row[1] += idle
        row[2] += idle_cost(cost, allocated, idle)
        row[3].add(workspace)
    rows = [PersonIdleRow(person, tuple(sorted(w)), a.quantize(QUANTITY), i.quantize(QUANTITY),
                          pricing.quantize_money(c, currency), currency)
            for (person, currency), (a, i, c, w) in sums.items()]
    return sorted(rows, key=lambda r: (-r.idle_gpu_hours, r.person, r.currency))


def totals_by_currency(rows, *fields: str) -> list[dict]:
    """The rows' sums of `fields`, one entry per currency."""
    out: dict[str, dict] = {}
    for row in rows:
        total = out.setdefault(row.currency, {"currency": row.currency, **{f: ZERO for f in fields}})
        for f in fields:
            total[f] += getattr(row, f) or ZERO  # a figure without a price (None) adds nothing
    return [out[c] for c in sorted(out)]


# --------------------------------------------------------------------------- unallocated capacity


@dataclass(frozen=True)
class UnallocatedRow:
    day: date
    pool: str
    gpus: int
    capacity_gpu_hours: Decimal
    allocated_gpu_hours: Decimal
    unallocated_gpu_hours: Decimal
    list_cost: Decimal | None  # None: no hour of the day had a rate for the pool's GPUs in this currency
    currency: str
    unpriced_gpu_hours: Decimal = Decimal(0)  # unallocated hours without a rate: not in list_cost
    vendor: str = ""
    gpu_model: str = ""

    @property
    def reason(self) -> str:
        """`pool_not_priced` when some unallocated hours have no price (never counted as 0.00), else ""."""
        return "pool_not_priced" if self.unpriced_gpu_hours else ""

    @property
    def reason_text(self) -> str:
        if not self.reason:
            return ""
        return pool_problem_text(self.reason, {"currencies": [self.currency], "vendor": self.vendor,
                                          "gpu_model": self.gpu_model})


def _hours_of(day: date, now: datetime) -> list[datetime]:
    """The day's hours (UTC starts) in the platform's zone, up to now."""
    start, end = day_bounds(day)
    hour, out = start.astimezone(UTC), []
    while hour < min(end, now):
        out.append(hour)
        hour += HOUR
    return out


def unallocated_by_pool_day(start: date, end: date, *, now: datetime) -> list[UnallocatedRow]:
    """Per pool and day: GPU capacity, what usage allocated of it, and the rest priced at list, once per
    currency that has a price timeline (unused capacity is no workspace's: each currency prices it on its
    own tables, and no total adds two). Hours a currency has no rate for are counted apart
    (`unpriced_gpu_hours`, reason `pool_not_priced`), never priced at 0.00."""
    timelines = {currency: price_tables(currency) for currency in price_currencies()}
    gpus = dict(NodePool.objects.annotate(n=Count("nodes__gpus")).values_list("name", "n"))
    allocated: dict[tuple[str, datetime], Decimal] = defaultdict(Decimal)
    for pool, hour, amount in _usage(start, end).values_list("pool", "hour", "allocated_gpu_hours").iterator():
        allocated[(pool, hour.astimezone(UTC))] += amount
    rows = []
    for pool in NodePool.objects.order_by("name"):
        count = gpus.get(pool.name, 0)
        day = start
        while day <= end:
            capacity = used = free = ZERO
            costs = dict.fromkeys(timelines, ZERO)
            unpriced = dict.fromkeys(timelines, ZERO)
            priced_hours = dict.fromkeys(timelines, 0)
            for hour in _hours_of(day, now):
                held = allocated.get((pool.name, hour), ZERO)
                rest = max(ZERO, count - held)
                capacity, used, free = capacity + count, used + min(held, Decimal(count)), free + rest
                for currency, tables in timelines.items():
                    try:
                        rates = pricing.table_in_force(tables, hour).rates
                        costs[currency] += rest * rates.gpu_rate(pool.vendor, pool.gpu_model)
                        priced_hours[currency] += 1
                    except ValueError:  # no table then, or no rate for the model: capacity without a price
                        unpriced[currency] += rest
            if capacity:
                rows.extend(UnallocatedRow(
                    day, pool.name, count, capacity, used.quantize(QUANTITY), free.quantize(QUANTITY),
                    pricing.quantize_money(cost, currency) if priced_hours[currency] else None, currency,
                    unpriced_gpu_hours=unpriced[currency].quantize(QUANTITY), vendor=pool.vendor,
                    gpu_model=pool.gpu_model)
                    for currency, cost in costs.items())
            day += timedelta(days=1)
    return rows


# --------------------------------------------------------------------------- who uses it


def usage_by_submitter(workspace, start: date, end: date) -> list[dict]:
    """A workspace's lines over the range per submitter (operators: any workspace)."""
    rows = ChargeLine.objects.filter(workspace=workspace, day__gte=start, day__lte=end)
    return sorted(_sums(rows, "submitted_by", "currency"), key=lambda r: (-r["cost"], r["submitted_by"]))


# --------------------------------------------------------------------------- month-end forecast


@dataclass(frozen=True)
class Forecast:
    workspace: object
    spent: Decimal           # this month so far
    per_day: Decimal         # usage cost per day over the basis
    basis_days: int          # complete days the rate was measured over (0: no usage yet)
    days_left: Decimal       # from now to the end of the month
    forecast: Decimal        # spent + per_day x days_left
    currency: str
    month: date
    budget: Budget | None

    @property
    def percent_of_budget(self) -> Decimal | None:
        if self.budget is None or not self.budget.amount:
            return None
        return (self.forecast * 100 / self.budget.amount).quantize(Decimal("0.1"))

    @property
    def over_budget(self) -> bool:
        return self.budget is not None and self.forecast > self.budget.amount


def forecast(workspace, *, now: datetime) -> Forecast:
    """The month-end spend of the workspace if it goes on as over the last 7 complete days."""
    tz = platform_tz()
    today = now.astimezone(tz).date()
    month = period_start(now)
    currency = workspace_currency(workspace, month)
    usage = ChargeLine.objects.filter(workspace=workspace, category=ChargeLine.Category.USAGE, currency=currency)
    first = usage.aggregate(first=Min("day"))["first"]
    basis = 0 if first is None else max(0, min(FORECAST_DAYS, (today - first).days))
    recent = money_sum(usage.filter(day__gte=today - timedelta(days=basis), day__lt=today)) if basis else ZERO
    per_day = recent / basis if basis else ZERO
    end = datetime.combine(month_after(month), time(0), tzinfo=tz)
    days_left = Decimal((end - now).total_seconds()) / Decimal(86400)
    status = budget_status(workspace, now=now)  # None without a usable budget
    spent = status.spent if status else spent_in_period(workspace, now=now)
    return Forecast(workspace=workspace, spent=spent, per_day=pricing.quantize_money(per_day, currency),
                    basis_days=basis, days_left=days_left.quantize(Decimal("0.1")),
                    forecast=pricing.quantize_money(spent + per_day * days_left, currency), currency=currency,
                    month=month, budget=status.budget if status else None)


# --------------------------------------------------------------------------- idle allocated hours per job


@dataclass(frozen=True)
class JobIdle:
    """A job's allocated and idle GPU-hours over all its usage lines, and what the idle ones cost."""

    allocated_gpu_hours: Decimal
    idle_gpu_hours: Decimal
    idle_cost: Decimal
    currency: str


def idle_by_job(job_ids) -> dict[int, JobIdle]:
    """Per job (notebooks' list): its lines' idle GPU-hours and their cost, as the capacity report counts
    them (each line's cost times its idle share, summed, rounded once). One query for all the jobs."""
    sums: dict[tuple[int, str], list] = {}
    lines = ChargeLine.objects.filter(category=ChargeLine.Category.USAGE, job_id__in=list(job_ids),
                                      allocated_gpu_hours__gt=0).values_list(
        "job_id", "currency", "allocated_gpu_hours", "idle_gpu_hours", "cost")
    for job_id, currency, allocated, idle, cost in lines.iterator():
        row = sums.setdefault((job_id, currency), [ZERO, ZERO, ZERO])
        row[0] += allocated
        row[1] += idle
        row[2] += idle_cost(cost, allocated, idle)
    return {job_id: JobIdle(a.quantize(QUANTITY), i.quantize(QUANTITY), pricing.quantize_money(c, currency), currency)
            for (job_id, currency), (a, i, c) in sums.items()}
