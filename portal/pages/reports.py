"""Finance report pages: thin views over billing.reports.selectors (reads) and billing.reports.services."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext, pgettext
from django.views.decorators.http import require_POST

from billing.api import (
    MINOR_UNITS,
    credits,
    export_dir,
    exports,
    invoice_render,
    invoice_selectors,
    ledger_services,
    month_end,
    one_revision,
    platform_tz,
    report_consolidation,
    report_services,
    report_totals,
    workspace_currencies,
)
from billing.api import report_selectors as reports
from billing.models import ChargeLine, ReportExport
from portal import history_catalogue as texts
from portal.console import audit
from portal.selectors import my_membership
from portal.templatetags.money import month_year
from scheduling.api import DomainError, clock, formats, said

ROWS_ON_PAGE = 500
BUDGET_FIELDS = ("amount", "currency", "thresholds")
BUDGET_CHECKS = ("block_at_limit", "suspend_preemptible")
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def _today():
    return clock.now().astimezone(platform_tz()).date()


@login_required
@one_revision()  # the page's many kept ledger figures share one read of the ledger's revision
def report_page(request):
    return _report_page(request)


def _report_page(request, *, budget_refused: dict | None = None, status: int = 200):
    """The report page; `budget_refused`: a budget form sent back ({"slug", "typed", "errors"}), shown with
    what was typed and each error beside its field."""
    try:
        filters = reports.parse_filters(request.GET, today=_today())
    except reports.FilterError as error:
        messages.error(request, str(error))
        filters = reports.parse_filters({}, today=_today())
    rows = reports.report_rows(request.user, filters)
    query = filters.to_query()
    workspaces = list(reports.report_workspaces(request.user))
    billed_in = workspace_currencies(workspaces)
    budgets = [(ws, report_services.budget_status(ws), my_membership(request, ws), billed_in[ws.pk],
                credits.workspace_credit(ws)) for ws in workspaces]
    context = {
        "filters": filters, "query": query, "qs": urlencode(query), "workspaces": workspaces,
        "qs_no_workspace": urlencode({k: v for k, v in query.items() if k not in ("workspace", "job")}),
        "qs_no_job": urlencode({k: v for k, v in query.items() if k != "job"}),
        "last_week": reports.last_week(_today()),
        "choices": reports.choices(request.user), "totals": reports.totals(rows),
        "by_workspace": reports.by_workspace(rows), "charts": reports.chart_data(rows, filters),
        "savings": reports.savings_by_period(rows, within=(filters.start, filters.end)),
        "jobs": reports.jobs_of(rows) if filters.workspace else None,
        "rows": rows.select_related("workspace").order_by("hour", "workspace_id", "job_id", "id")[:ROWS_ON_PAGE],
        "rows_on_page": ROWS_ON_PAGE, "budgets": budgets, "as_of": reports.as_of(rows),
        "month": filters.end.strftime("%Y-%m"),  # the statement of the month the range ends in
        "exports": ReportExport.objects.filter(user=request.user)[:5],
        "currencies": sorted(MINOR_UNITS),
        # every line converted into the reporting currency: a missing rate is the page's 422
        "consolidated": report_consolidation.consolidated_total(rows, filters.currency) if filters.currency else None,
        "budget_refused": budget_refused or {},
    }
    return render(request, "billing/reports.html", context, status=status)


def _csv_source(user, filters):
    """The ledger lines in FOCUS columns, or with group_by the costs API's grouping (every page)."""
    rows = reports.report_rows(user, filters)  # 404 for another tenant's workspace
    if not filters.group_by:
        return exports.HEADER, exports.line_rows(rows, currency=filters.currency)
    report = reports.costs(user, filters, page_size=None)
    group = reports.GROUPS[filters.group_by]
    return exports.grouped_header(group), exports.grouped_rows(report.rows, group)


@login_required
async def report_csv(request):
    """Streamed under ASGI: rows are read in chunks by an async iterator, memory stays flat.
    Every parameter is checked before the first byte is sent."""
    user = await request.auser()
    filters = reports.parse_filters(request.GET, today=_today())
    header, rows = await sync_to_async(lambda: _csv_source(user, filters))()
    response = StreamingHttpResponse(
        exports.csv_chunks(exports.aiter_rows(rows), header=header), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="report-{filters.start}-{filters.end}.csv"'
    return response


@login_required
def report_xlsx(request):
    """The CSV's rows, with the same parameters, as an Excel file built now (the Build Excel file button
    builds a large one in the background instead); its Totals sheet as the background one's."""
    filters = reports.parse_filters(request.GET, today=_today())
    header, rows = _csv_source(request.user, filters)
    total = report_totals(reports.report_rows(request.user, filters), filters)
    with tempfile.NamedTemporaryFile(suffix=".xlsx") as handle:
        exports.write_xlsx(handle.name, rows, header=header, total=total)
        content = Path(handle.name).read_bytes()
    response = HttpResponse(content, content_type=XLSX)
    response["Content-Disposition"] = f'attachment; filename="report-{filters.start}-{filters.end}.xlsx"'
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
    messages.info(request, gettext("The Excel export is being built; it appears below when done."))
    return redirect(f"{reverse('reports')}?{urlencode(filters.to_query())}")


def _own_export(request, pk) -> ReportExport:
    export = ReportExport.objects.filter(pk=pk, user=request.user).first()
    if export is None:
        raise Http404(gettext("No such export"))
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
        raise Http404(gettext("The export is not ready"))
    path = export_dir() / export.file_name
    if not path.exists():
        raise Http404(gettext("The export file is gone"))
    return FileResponse(path.open("rb"), as_attachment=True, filename=export.file_name,
                        content_type=XLSX)


def _statement(request, slug, month):
    first = reports.parse_month(month)
    return first, reports.monthly_statement(request.user, slug, first)


@login_required
def statement(request, slug, month):
    first, stmt = _statement(request, slug, month)
    template = "billing/statement_print.html" if request.GET.get("print") else "billing/statement.html"
    target = _statement_currency(request)
    return render(request, template, {
        "stmt": stmt, "month_end": month_end(first), "budget": report_services.budget_status(stmt.workspace),
        "is_finance": _is_finance(request.user, stmt.workspace), "reporting_currency": target,
        "consolidated": report_consolidation.consolidated_total(_statement_lines(stmt), target) if target else None,
        "currency_qs": urlencode({"currency": target}) if target else "",
    })


def _is_finance(user, workspace) -> bool:
    try:
        ledger_services.require_finance(user, workspace)
    except PermissionDenied:
        return False
    return True


def _statement_lines(stmt):
    return ChargeLine.objects.filter(workspace=stmt.workspace, period=stmt.month)


def _statement_currency(request) -> str:
    """?currency=XXX: the statement's lines consolidated into XXX (each converted line keeps its original)."""
    raw = request.GET.get("currency", "")
    return reports.parse_filters({"currency": raw}, today=_today()).currency if raw else ""


@login_required
def statement_csv(request, slug, month):
    _, stmt = _statement(request, slug, month)
    buffer = io.StringIO()
    writer = exports.SafeCsvWriter(buffer, exports.HEADER, lineterminator="\r\n")
    writer.writerow(exports.HEADER)
    writer.writerows(exports.line_rows(_statement_lines(stmt), currency=_statement_currency(request)))
    response = HttpResponse(buffer.getvalue().encode(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="statement-{slug}-{stmt.month:%Y-%m}.csv"'
    return response


@login_required
def statement_xlsx(request, slug, month):
    _, stmt = _statement(request, slug, month)
    # the Totals sheet's labels in the reader's language; the cost columns stay FOCUS's English
    total = [(pgettext("excel totals", "Workspace"), stmt.workspace.slug),
             (pgettext("excel totals", "Month"), f"{stmt.month:%Y-%m}"),
             (pgettext("excel totals", "Currency"), stmt.currency), (pgettext("excel totals", "Opening"), stmt.opening),
             (pgettext("excel totals", "Total"), stmt.total), (pgettext("excel totals", "Closing"), stmt.closing),
             (pgettext("excel totals", "As of"), stmt.as_of.isoformat() if stmt.as_of else "")]
    if target := _statement_currency(request):
        converted = report_consolidation.consolidated_total(_statement_lines(stmt), target)
        total += [(pgettext("excel totals", "Reporting currency"), target),
                  (pgettext("excel totals", "Total in the reporting currency"), converted)]
    with tempfile.NamedTemporaryFile(suffix=".xlsx") as handle:
        exports.write_xlsx(handle.name, exports.line_rows(_statement_lines(stmt), currency=target), total=total)
        content = Path(handle.name).read_bytes()
    response = HttpResponse(content, content_type=XLSX)
    response["Content-Disposition"] = f'attachment; filename="statement-{slug}-{stmt.month:%Y-%m}.xlsx"'
    return response


@require_POST
@login_required
def statement_close(request, slug, month):
    first, stmt = _statement(request, slug, month)
    closed = ledger_services.close_period(user=request.user, workspace=stmt.workspace, month=first)
    audit.record(request.user, "close period", closed, message=f"{slug} {first:%Y-%m}: {closed.total} "
                 f"{closed.currency}")
    if (invoice := invoice_selectors.invoice_issued_at_close(closed)) is not None:
        audit.record(request.user, "issue invoice", invoice,
                     message=f"{invoice.account.slug} {invoice.period:%Y-%m}: {invoice.total} {invoice.currency}")
    messages.success(request, gettext("%(month)s is closed for %(workspace)s: its lines are final.") % {
        "month": month_year(first), "workspace": stmt.workspace.name})
    return redirect("reports-statement", slug=slug, month=month)


@login_required
def invoice_pdf(request, pk):
    """An invoice's PDF: finance, and the owners and finance members of the account's workspaces; 404 to others."""
    invoice = invoice_selectors.get_invoice(request.user, pk)
    response = HttpResponse(invoice_render.invoice_pdf(invoice), content_type="application/pdf")
    response["Content-Disposition"] = f'attachment; filename="{invoice_render.file_name(invoice)}"'
    return response


@login_required
def invoice_html(request, pk):
    invoice = invoice_selectors.get_invoice(request.user, pk)
    return HttpResponse(invoice_render.invoice_html(invoice))


@require_POST
@login_required
def adjustment_add(request, slug):
    workspace = reports.get_report_workspace(request.user, slug)
    line = ledger_services.add_adjustment(user=request.user, workspace=workspace,
                                          amount=request.POST.get("amount", ""), reason=request.POST.get("reason", ""))
    audit.record(request.user, "adjust", line, message=said(
        texts.ADJUSTED_FROM_REPORT, category=said(line.category),
        cost=line.cost, currency=line.currency, workspace=slug, reason=line.reason))
    messages.success(request, gettext("%(kind)s of %(cost)s recorded.") % {
        "kind": line.get_category_display(), "cost": formats.money(line.cost, line.currency)})
    return redirect("reports-statement", slug=slug, month=f"{line.period:%Y-%m}")


@require_POST
@login_required
def budget_save(request, slug):
    workspace = reports.get_report_workspace(request.user, slug)
    try:
        report_services.set_budget(user=request.user, workspace=workspace, amount=request.POST.get("amount", ""),
                                   currency=request.POST.get("currency") or None,
                                   block_at_limit=request.POST.get("block_at_limit") == "on",
                                   suspend_preemptible=request.POST.get("suspend_preemptible") == "on",
                                   thresholds=request.POST.get("thresholds") or None)
        messages.success(request, gettext("Budget of %(workspace)s saved.") % {"workspace": workspace.name})
    except PermissionDenied as error:
        messages.error(request, str(error))
    except DomainError as error:  # the form again, as typed, each error beside its field; nothing saved
        typed = {name: request.POST.get(name, "") for name in BUDGET_FIELDS}
        typed.update({name: request.POST.get(name) == "on" for name in BUDGET_CHECKS})
        return _report_page(request, budget_refused={"slug": slug, "typed": typed, "errors": error.errors},
                            status=error.status)
    return redirect("reports")
