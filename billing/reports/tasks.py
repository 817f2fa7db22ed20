"""Celery tasks for reports: Excel exports."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.utils import translation
from django.utils.translation import pgettext

from billing.ledger.selectors import sums_by_currency
from billing.models import ReportExport
from billing.reports import exports
from billing.reports import selectors as reports
from billing.reports.consolidation import consolidated_total
from scheduling.api import clock


def export_dir():
    path = settings.REPORT_EXPORT_DIR
    path.mkdir(parents=True, exist_ok=True)
    return path


@shared_task
def build_excel_export(export_id: str) -> str:
    """Write the export's rows (as its user may see them, with its filters) to an .xlsx file."""
    export = ReportExport.objects.select_related("user").get(pk=export_id)
    # A resent task may arrive after the first one took the export: one build each.
    if not ReportExport.objects.filter(pk=export.pk, state=ReportExport.State.QUEUED).update(
            state=ReportExport.State.RUNNING):
        return export.file_name
    # the sheets and labels in the language the user asked in (the columns are English whatever it is)
    with translation.override(export.filters.get("language") or settings.LANGUAGE_CODE):
        return _build(export)


def report_totals(rows, filters) -> list[tuple[str, object]]:
    """The Totals sheet of a report's Excel file: one total per currency (amounts of two currencies are never
    added), the latest usage included and the range."""
    as_of = reports.as_of(rows)
    sums = ([(filters.currency, consolidated_total(rows, filters.currency))] if filters.currency
            else sums_by_currency(rows))
    labelled = [(pgettext("excel totals", "Total") if len(sums) == 1
                 else pgettext("excel totals", "Total %(currency)s") % {"currency": c}, t) for c, t in sums]
    return [(pgettext("excel totals", "Currency"), ", ".join(c for c, _ in sums)), *labelled,
            (pgettext("excel totals", "As of"), as_of.isoformat() if as_of else ""),
            (pgettext("excel totals", "From"), filters.start.isoformat()),
            (pgettext("excel totals", "To"), filters.end.isoformat())]


def _build(export: ReportExport) -> str:
    try:
        filters = reports.parse_filters(export.filters, today=clock.now().date())
        rows = reports.report_rows(export.user, filters)
        total = report_totals(rows, filters)
        ReportExport.objects.filter(pk=export.pk).update(rows_total=rows.count())
        name = f"report-{filters.start}-{filters.end}-{export.pk.hex[:8]}.xlsx"

        def progress(done: int) -> None:
            ReportExport.objects.filter(pk=export.pk).update(rows_done=done)

        exports.write_xlsx(export_dir() / name, exports.line_rows(rows, chunk_size=5000, currency=filters.currency),
                           total=total,
                           progress=progress)
    except Exception as error:
        ReportExport.objects.filter(pk=export.pk).update(state=ReportExport.State.FAILED, error=str(error),
                                                         finished=clock.now())
        raise
    ReportExport.objects.filter(pk=export.pk).update(state=ReportExport.State.DONE, file_name=name,
                                                     finished=clock.now())
    return name
