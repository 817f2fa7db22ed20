"""The tenant dashboard: this month so far for one workspace, read through the finance reports'
own selectors (the ledger's lines), so the dashboard and the report show the same totals."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

from django.db.models import Count

from billing.models import ChargeLine
from billing.reports import selectors as reports
from billing.reports import services as report_services
from billing.time_zone import platform_tz
from scheduling.api import clock
from scheduling.models import Job

ZERO = Decimal(0)


@dataclass
class TenantDashboard:
    month_start: date
    today: date
    totals: reports.Totals | None
    by_day: list[dict]
    jobs_by_state: list[dict]
    wasters: list[dict]
    budget: object  # billing.reports.services.BudgetStatus | None
    as_of: datetime | None

    @property
    def efficiency(self) -> Decimal | None:
        t = self.totals
        if t is None or not t.allocated_gpu_hours:
            return None
        return (t.used_gpu_hours * 100 / t.allocated_gpu_hours).quantize(Decimal("0.1"))

    @property
    def savings(self) -> Decimal:
        return (self.totals.exclusive_cost - self.totals.cost) if self.totals else ZERO

    def filters(self, slug: str) -> dict[str, str]:
        """The finance report's query for the same figures."""
        return {"start": self.month_start.isoformat(), "end": self.today.isoformat(), "workspace": slug}


def tenant_dashboard(user, workspace, *, now: datetime | None = None) -> TenantDashboard:
    """This month so far for one workspace the user belongs to, read through the finance reports'
    own selectors (the ledger's lines), so the dashboard and the report show the same totals."""
    now = now or clock.now()
    today = now.astimezone(platform_tz()).date()
    month_start = today.replace(day=1)
    filters = reports.ReportFilters(start=month_start, end=today, workspace=workspace.slug)
    rows = reports.report_rows(user, filters)  # 404 unless the user is a member
    totals = reports.totals(rows)
    states = list(Job.objects.filter(workspace=workspace).order_by().values("state").annotate(n=Count("id"))
                  .order_by("state"))
    wasters = reports.jobs_of(rows.filter(category=ChargeLine.Category.USAGE), most_idle=5)
    return TenantDashboard(month_start=month_start, today=today, totals=totals[0] if totals else None,
                           by_day=reports.by_day(rows), jobs_by_state=states,
                           wasters=[w for w in wasters if (w["idle_gpu_hours"] or ZERO) > 0],
                           budget=report_services.budget_status(workspace, now=now), as_of=reports.as_of(rows))
