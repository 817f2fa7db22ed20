"""Per-person usage: /reports/users/ for finance, owners and operators (across their workspaces), and each
person's own usage on their account page. Thin views over billing.reports.selectors."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.translation import pgettext

from billing.api import MINOR_UNITS, exports, platform_tz
from billing.api import report_selectors as reports
from scheduling.api import clock

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def _today():
    return clock.now().astimezone(platform_tz()).date()


@login_required
def user_report(request):
    """GET ?start&end&workspace&currency[&format=csv|xlsx]: 403 for someone who is finance or owner nowhere."""
    filters = reports.parse_filters(request.GET, today=_today())
    report = reports.user_report(request.user, filters)
    name = f"users-{filters.start}-{filters.end}"
    if request.GET.get("format") == "csv":
        buffer = io.StringIO()
        writer = exports.SafeCsvWriter(buffer, report.header, numbers=USER_NUMBERS, lineterminator="\r\n")
        writer.writerow(report.header)
        writer.writerows(report.table())
        response = HttpResponse(buffer.getvalue().encode(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
        return response
    if request.GET.get("format") == "xlsx":
        total = [(pgettext("excel totals", "Total %(currency)s") % {"currency": c}, t) for c, t in report.totals]
        with tempfile.NamedTemporaryFile(suffix=".xlsx") as handle:
            exports.write_xlsx(handle.name, report.table(), header=report.header, total=total)
            content = Path(handle.name).read_bytes()
        response = HttpResponse(content, content_type=XLSX)
        response["Content-Disposition"] = f'attachment; filename="{name}.xlsx"'
        return response
    query = filters.to_query()
    query.pop("group_by", None)
    return render(request, "billing/user_reports.html", {
        "filters": filters, "report": report, "qs": urlencode(query), "currencies": sorted(MINOR_UNITS),
        "workspaces": list(reports.user_report_workspaces(request.user)),
    })


USER_NUMBERS = frozenset({"gpu_hours", "cost", "idle_share", "jobs", "x_OriginalCost", "x_ExchangeRate"})


@login_required
def my_usage(request):
    """The signed-in person's own lines (jobs they submitted) per month: nobody else's."""
    return render(request, "portal/my_usage.html", {"rows": reports.own_usage(request.user, today=_today())})
