"""Finance report pages: thin views over billing.reports.selectors (reads) and billing.reports.services."""

from __future__ import annotations

from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from billing.models import ReportExport
from billing.reports import exports
from billing.reports import selectors as reports
from billing.reports import services as report_services
from billing.reports.tasks import export_dir
from portal.selectors import membership_for
from scheduling import clock

ROWS_ON_PAGE = 500


def _today():
    return clock.now().astimezone(report_services.platform_tz()).date()


@login_required
def report_page(request):
    try:
        filters = reports.parse_filters(request.GET, today=_today())
    except reports.FilterError as error:
        messages.error(request, str(error))
        filters = reports.parse_filters({}, today=_today())
    rows = reports.report_rows(request.user, filters)
    query = filters.to_query()
    workspaces = list(reports.report_workspaces(request.user))
    budgets = [(ws, report_services.budget_status(ws), membership_for(request.user, ws)) for ws in workspaces]
    context = {
        "filters": filters, "query": query, "qs": urlencode(query), "workspaces": workspaces,
        "qs_no_workspace": urlencode({k: v for k, v in query.items() if k not in ("workspace", "job")}),
        "qs_no_job": urlencode({k: v for k, v in query.items() if k != "job"}),
        "last_week": reports.last_week(_today()),
        "choices": reports.choices(request.user), "totals": reports.totals(rows),
        "by_workspace": reports.by_workspace(rows), "charts": reports.chart_data(rows, filters),
        "jobs": reports.jobs_of(rows) if filters.workspace else None,
        "rows": rows.select_related("workspace").order_by("day", "workspace_id", "job_id", "node")[:ROWS_ON_PAGE],
        "rows_on_page": ROWS_ON_PAGE, "budgets": budgets,
        "month": filters.end.strftime("%Y-%m"),  # the statement of the month the range ends in
        "exports": ReportExport.objects.filter(user=request.user)[:5],
    }
    return render(request, "billing/reports.html", context)


def _csv_rows(user, filters):
    return (reports.report_rows(user, filters).order_by("day", "workspace_id", "job_id", "node", "id")
            .values_list(*exports.FIELDS))


@login_required
async def report_csv(request):
    """Streamed under ASGI: rows are read in chunks by an async iterator, memory stays flat."""
    user = await request.auser()
    filters = reports.parse_filters(request.GET, today=_today())
    rows = await sync_to_async(lambda: _csv_rows(user, filters))()  # 404 for another tenant's workspace
    response = StreamingHttpResponse(
        exports.csv_chunks(exports.aiter_rows(exports.raw_rows(rows))), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="report-{filters.start}-{filters.end}.csv"'
    return response


@require_POST
@login_required
def excel_start(request):
    filters = reports.parse_filters(request.POST, today=_today())
    reports.report_rows(request.user, filters)  # scope check now: 404 for a workspace not the user's
    export = report_services.start_excel_export(request.user, filters.to_json())
    status_url = reverse("reports-export", args=[export.pk])
    if request.headers.get("Accept", "").startswith("application/json"):
        return JsonResponse({"id": str(export.pk), "status_url": status_url}, status=202)
    messages.info(request, "The Excel export is being built; it appears below when done.")
    return redirect(f"{reverse('reports')}?{urlencode(filters.to_query())}")


def _own_export(request, pk) -> ReportExport:
    export = ReportExport.objects.filter(pk=pk, user=request.user).first()
    if export is None:
        raise Http404("No such export")
    return export


@login_required
def excel_status(request, pk):
    export = _own_export(request, pk)
    percent = 100 if export.state == ReportExport.State.DONE else (
        int(export.rows_done * 100 / export.rows_total) if export.rows_total else 0)
    return JsonResponse({
        "id": str(export.pk), "state": export.state, "rows_done": export.rows_done, "rows_total": export.rows_total,
        "percent": percent, "error": export.error,
        "download_url": reverse("reports-export-download", args=[export.pk])
        if export.state == ReportExport.State.DONE else None,
    })


@login_required
def excel_download(request, pk):
    export = _own_export(request, pk)
    if export.state != ReportExport.State.DONE:
        raise Http404("The export is not ready")
    path = export_dir() / export.file_name
    if not path.exists():
        raise Http404("The export file is gone")
    return FileResponse(path.open("rb"), as_attachment=True, filename=export.file_name,
                        content_type="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")


@login_required
def statement(request, slug, month):
    first = reports.parse_month(month)
    stmt = reports.monthly_statement(request.user, slug, first)
    template = "billing/statement_print.html" if request.GET.get("print") else "billing/statement.html"
    return render(request, template, {"stmt": stmt, "month_end": reports.month_end(first),
                                      "budget": report_services.budget_status(stmt.workspace)})


@require_POST
@login_required
def budget_save(request, slug):
    workspace = reports.get_report_workspace(request.user, slug)
    try:
        report_services.set_budget(user=request.user, workspace=workspace, amount=request.POST.get("amount", ""),
                                   currency=request.POST.get("currency") or "USD",
                                   block_at_limit=request.POST.get("block_at_limit") == "on")
        messages.success(request, f"Budget of {workspace.name} saved.")
    except PermissionDenied as error:
        messages.error(request, str(error))
    return redirect("reports")  # a refused amount is a DomainError: a 400 page saying why
