"""Writes behind the reports: daily rollups, budgets with their alerts, background exports."""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Q, Sum

from billing import pricing
from billing.metering.costs import replica_allocation
from billing.models import Budget, BudgetAlert, ReportExport, UsageDay, UsageHour
from billing.selectors import price_tables
from billing.services import platform_tz
from scheduling import clock
from scheduling.errors import DomainError
from scheduling.models import Replica

log = logging.getLogger(__name__)
ZERO = Decimal(0)
HOUR = timedelta(hours=1)
SHARING_NAMES = {"whole": "exclusive"}  # the slice kind "whole" is what quotes call exclusive


# --------------------------------------------------------------------------- daily rollups


def day_bounds(day: date) -> tuple[datetime, datetime]:
    """Start and end of a day in the platform's time zone."""
    tz = platform_tz()
    start = datetime.combine(day, time(0), tzinfo=tz)
    return start, datetime.combine(day + timedelta(days=1), time(0), tzinfo=tz)


def _scaled(replica: Replica, at: datetime) -> datetime:
    """Simulated clusters run faster than the wall clock; billing counts their time."""
    return replica.started + (at - replica.started) * replica.clock_scale


def _estimate(job) -> Decimal:
    try:
        return Decimal(str((job.quote or {}).get("estimate_low") or 0))
    except ArithmeticError:
        return ZERO


@dataclass
class _Acc:
    workspace_id: int
    queue: str
    job_name: str
    currency: str
    alloc: Decimal = ZERO
    exclusive: Decimal = ZERO
    cpu: Decimal = ZERO
    mem: Decimal = ZERO
    cost: Decimal = ZERO
    on_demand: Decimal = ZERO


def _on_demand(segments, exclusive: pricing.Allocation, priority: int) -> Decimal:
    """The same held time on whole GPUs at the peak, non-spot rate of the table then in force."""
    return sum((pricing.hours(s.duration) * pricing.hourly_price(s.table.rates, exclusive, priority=priority)
                for s in segments), ZERO)


def _first_started(job_ids) -> dict[int, datetime]:
    rows = (Replica.objects.filter(job_id__in=job_ids, started__isnull=False, node__isnull=False)
            .values_list("job_id", "started"))
    first: dict[int, datetime] = {}
    for job_id, started in rows:
        first[job_id] = min(started, first.get(job_id, started))
    return first


@transaction.atomic
def rollup_day(day: date, *, now: datetime | None = None) -> int:
    """Recompute one day's rows (per job, node, GPU model, sharing mode) and replace what was
    there. Returns the rows written. Used GPU-hours come from UsageHour (it outlives raw samples),
    split between a job's nodes by the GPU-hours each held."""
    start, end = day_bounds(day)
    now = now or clock.now()
    tables, tz = price_tables(), platform_tz()
    acc: dict[tuple, _Acc] = {}
    replicas = (Replica.objects.filter(started__isnull=False, started__lt=end, node__isnull=False)
                .filter(Q(ended__isnull=True) | Q(ended__gt=start)).select_related("job", "job__queue", "node__pool"))
    jobs = {}
    for replica in replicas:
        job, pool = replica.job, replica.node.pool
        jobs[job.pk] = job
        role = next((r for r in job.roles if r["name"] == replica.role), {})
        allocation = replica_allocation(replica, pool, role)
        exclusive = pricing.Allocation(share=Decimal(len(replica.gpu_indices)), vendor=allocation.vendor,
                                       gpu_model=allocation.gpu_model, cpu_cores=allocation.cpu_cores,
                                       memory_gib=allocation.memory_gib)
        a, b = max(replica.started, start), min(replica.ended or now, end)
        if b <= a:
            continue
        piece = pricing.HeldInterval(_scaled(replica, a), _scaled(replica, b), allocation, spot=pool.spot)
        cost = pricing.cost_for_intervals([piece], tables, priority=job.priority, tz=tz)
        held = pricing.hours(piece.end - piece.start)
        sharing = (replica.slice or {}).get("kind", "whole")
        key = (job.pk, replica.node.name, pool.gpu_model, SHARING_NAMES.get(sharing, sharing))
        row = acc.setdefault(key, _Acc(job.workspace_id, job.queue.name, job.name, cost.currency))
        row.alloc += allocation.share * held
        row.exclusive += exclusive.share * held
        row.cpu += allocation.cpu_cores * held
        row.mem += allocation.memory_gib * held
        row.cost += sum((s.amount for s in cost.segments), ZERO)
        row.on_demand += _on_demand(cost.segments, exclusive, job.priority)

    used = _used_by_job_model(start, end)
    alloc_by_job_model: dict[tuple, Decimal] = defaultdict(Decimal)
    rows_by_job: dict[int, list[tuple]] = defaultdict(list)
    for key, row in acc.items():
        alloc_by_job_model[(key[0], key[2], key[3])] += row.alloc
        rows_by_job[key[0]].append(key)
    first = _first_started(list(jobs))
    day_rows = []
    for key, row in acc.items():
        job_id, node, model, sharing = key
        group_alloc = alloc_by_job_model[(job_id, model, sharing)]
        group_used = used.get((job_id, model, sharing), ZERO)
        row_used = group_used * row.alloc / group_alloc if group_alloc else ZERO
        estimated = ZERO
        if start <= first[job_id] < end:  # the whole frozen estimate goes to the day the job started
            job_alloc = sum((acc[k].alloc for k in rows_by_job[job_id]), ZERO)
            job_rows = len(rows_by_job[job_id])
            estimated = _estimate(jobs[job_id]) * (row.alloc / job_alloc if job_alloc else Decimal(1) / job_rows)
        day_rows.append(UsageDay(
            day=day, workspace_id=row.workspace_id, queue=row.queue, job_id=job_id, job_name=row.job_name,
            node=node, gpu_model=model, sharing=sharing, allocated_gpu_hours=row.alloc, used_gpu_hours=row_used,
            idle_gpu_hours=max(ZERO, row.alloc - row_used), exclusive_gpu_hours=row.exclusive,
            cpu_core_hours=row.cpu, memory_gib_hours=row.mem, estimated_cost=estimated, cost=row.cost,
            on_demand_cost=row.on_demand, currency=row.currency,
        ))
    UsageDay.objects.filter(day=day).delete()
    UsageDay.objects.bulk_create(day_rows, batch_size=1000)
    return len(day_rows)


def _used_by_job_model(start: datetime, end: datetime) -> dict[tuple, Decimal]:
    rows = (UsageHour.objects.filter(hour__gte=start, hour__lt=end)
            .values_list("job_id", "gpu_model", "sharing").annotate(used=Sum("used_gpu_hours")))
    return {(job_id, model, SHARING_NAMES.get(sharing, sharing)): used or ZERO
            for job_id, model, sharing, used in rows}


def rollup_days(first: date, last: date) -> int:
    """Every day from `first` to `last` inclusive."""
    if last < first:
        raise ValueError(f"rollup range ends ({last}) before it starts ({first})")
    written, day = 0, first
    while day <= last:
        written += rollup_day(day)
        day += timedelta(days=1)
    return written


# --------------------------------------------------------------------------- budgets

THRESHOLDS = (80, 100)


def period_start(at: datetime) -> date:
    """Budgets run per calendar month in the platform's time zone."""
    return at.astimezone(platform_tz()).date().replace(day=1)


def spent_in_period(workspace, *, now: datetime | None = None) -> Decimal:
    """What the workspace's jobs cost this month so far (from the hourly rollups)."""
    now = now or clock.now()
    start, _ = day_bounds(period_start(now))
    total = UsageHour.objects.filter(workspace=workspace, hour__gte=start, hour__lt=now).aggregate(s=Sum("cost"))["s"]
    return total or ZERO


def _can_manage(user, workspace):
    membership = workspace.memberships.filter(user=user).first() if user.is_authenticated else None
    if membership is None or not membership.can_manage_budget:
        raise PermissionDenied("Only the workspace's owners and finance may set its budget.")
    return membership


class BudgetError(DomainError):
    field = "amount"


MAX_BUDGET = Decimal("1e12")  # Budget.amount holds 14 digits, 2 after the point


def set_budget(*, user, workspace, amount: Decimal | str, currency: str = "USD",
               block_at_limit: bool = False) -> Budget:
    """Create or change a workspace's monthly budget. Only an owner may block submissions."""
    membership = _can_manage(user, workspace)
    currency = str(currency).upper()
    try:
        places = pricing.minor_unit(currency)
    except ValueError as error:
        raise BudgetError(str(error), field="currency") from None
    try:
        amount = Decimal(str(amount).strip())
    except ArithmeticError:
        raise BudgetError(f"budget amount {str(amount)[:40]!r} is not a number") from None
    if not amount.is_finite() or amount <= 0 or amount >= MAX_BUDGET:
        raise BudgetError(f"budget amount must be a positive number below {MAX_BUDGET:,.0f}")
    amount = pricing.quantize_money(amount, currency)
    if amount <= 0:  # e.g. 0.001 USD: stored as 0, then every percentage divides by zero
        raise BudgetError(f"budget amount must be at least {Decimal(1).scaleb(-places)} {currency}")
    current = Budget.objects.filter(workspace=workspace).first()
    if not membership.can_block_submissions and block_at_limit != bool(current and current.block_at_limit):
        raise PermissionDenied("Only an owner may choose to block submissions at the limit.")
    budget, _ = Budget.objects.update_or_create(
        workspace=workspace, defaults={"amount": amount, "currency": currency, "block_at_limit": block_at_limit})
    return budget


@dataclass(frozen=True)
class BudgetStatus:
    budget: Budget
    spent: Decimal
    percent: Decimal
    period_start: date
    alerts: list[BudgetAlert]

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.budget.amount


def _usable_budget(workspace) -> Budget | None:
    """The workspace's budget, or None when there is none or its stored amount is unusable (0, or
    an overflow SQLite keeps as Infinity): such a row must not break the workspace's pages."""
    try:
        budget = Budget.objects.filter(workspace=workspace).first()
    except ArithmeticError:  # the database value cannot be read back as a Decimal
        log.warning("budget of workspace %s is unreadable; ignored", getattr(workspace, "slug", workspace))
        return None
    if budget is not None and not (budget.amount.is_finite() and budget.amount > 0):
        log.warning("budget of workspace %s has amount %s; ignored", workspace.slug, budget.amount)
        return None
    return budget


def budget_status(workspace, *, now: datetime | None = None) -> BudgetStatus | None:
    budget = _usable_budget(workspace)
    if budget is None:
        return None
    now = now or clock.now()
    spent = spent_in_period(workspace, now=now)
    start = period_start(now)
    return BudgetStatus(budget=budget, spent=spent, percent=(spent * 100 / budget.amount).quantize(Decimal("0.1")),
                        period_start=start, alerts=list(budget.alerts.filter(period_start=start)))


def check_budget_allows_submit(workspace) -> str | None:
    """Why a new submission must be refused (the workspace spent its budget and its owner chose
    to block), or None when it may go ahead."""
    status = budget_status(workspace)
    if status is None or not status.budget.block_at_limit or not status.exhausted:
        return None
    b = status.budget
    return (f"Workspace {workspace.slug} has spent {status.spent.quantize(Decimal('0.01'))} {b.currency} of its "
            f"{b.amount} {b.currency} budget for the month starting {status.period_start}; its owner blocks "
            "new submissions at the limit.")


def _recipients(workspace) -> list[str]:
    members = [m for m in workspace.memberships.select_related("user") if m.can_manage_budget]
    return sorted({m.user.email for m in members if m.user.email})


def check_budgets(*, now: datetime | None = None) -> list[BudgetAlert]:
    """Fire every threshold crossed this period that has not fired yet; email owners and finance."""
    now = now or clock.now()
    fired = []
    # Workspace by workspace: one bad row must not stop the alerts of the others.
    workspace_ids = list(Budget.objects.order_by("workspace_id").values_list("workspace_id", flat=True))
    for workspace in Budget.workspace.field.related_model.objects.filter(pk__in=workspace_ids).order_by("pk"):
        try:
            fired += _check_budget(workspace, now)
        except Exception:
            log.exception("budget check of workspace %s failed", workspace.slug)
    return fired


def _check_budget(workspace, now: datetime) -> list[BudgetAlert]:
    fired = []
    status = budget_status(workspace, now=now)
    if status is not None:
        budget = status.budget
        for threshold in THRESHOLDS:
            if status.spent * 100 < budget.amount * threshold:
                continue
            try:
                with transaction.atomic():
                    alert = BudgetAlert.objects.create(budget=budget, period_start=status.period_start,
                                                       threshold=threshold, spent=status.spent)
            except IntegrityError:
                continue  # already fired this period
            fired.append(alert)
            _send_alert(budget, alert)
    return fired


def _send_alert(budget: Budget, alert: BudgetAlert) -> None:
    ws = budget.workspace
    subject = f"[GPU Platform] {ws.name}: {alert.threshold} % of the monthly budget spent"
    body = (f"Workspace {ws.name} ({ws.slug}) has spent {alert.spent.quantize(Decimal('0.01'))} {budget.currency} "
            f"of its {budget.amount} {budget.currency} budget for the month starting {alert.period_start}.\n")
    if alert.threshold >= 100 and budget.block_at_limit:
        body += "New submissions are blocked until the next month or a higher budget.\n"
    recipients = _recipients(ws)
    if recipients:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, recipients)
    log.info("budget alert: %s", subject)


# --------------------------------------------------------------------------- exports


def start_excel_export(user, filters: dict) -> ReportExport:
    """Record an export for `user` and queue the Celery task that builds it."""
    from billing.reports.tasks import build_excel_export

    export = ReportExport.objects.create(user=user, filters=filters)
    transaction.on_commit(lambda: build_excel_export.delay(str(export.pk)))
    return export
