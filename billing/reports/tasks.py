"""Celery tasks for reports: daily rollups, budget alerts and Excel exports."""

from __future__ import annotations

from datetime import date, timedelta

from celery import shared_task
from django.conf import settings

from billing.models import ReportExport
from billing.reports import exports
from billing.reports import selectors as reports
from billing.reports import services as report_services
from scheduling import clock


@shared_task
def rollup_recent_days() -> int:
    """Today and yesterday (in the platform's time zone): late hours land in either."""
    today = clock.now().astimezone(report_services.platform_tz()).date()
    return report_services.rollup_days(today - timedelta(days=1), today)


@shared_task
def rollup_past_day(day: str) -> int:
    """Re-run one past day (YYYY-MM-DD); safe to repeat."""
    return report_services.rollup_day(date.fromisoformat(day))


@shared_task
def check_budgets() -> int:
    return len(report_services.check_budgets())


def export_dir():
    path = settings.REPORT_EXPORT_DIR
    path.mkdir(parents=True, exist_ok=True)
    return path


@shared_task
def build_excel_export(export_id: str) -> str:
    """Write the export's rows (as its user may see them, with its filters) to an .xlsx file."""
    export = ReportExport.objects.select_related("user").get(pk=export_id)
    export.state = ReportExport.State.RUNNING
    export.save(update_fields=["state"])
    try:
        filters = reports.parse_filters(export.filters, today=clock.now().date())
        rows = reports.report_rows(export.user, filters)
        totals = reports.totals(rows)  # the page's own figures, for the Totals sheet
        ReportExport.objects.filter(pk=export.pk).update(rows_total=sum(t.rows for t in totals))
        name = f"report-{filters.start}-{filters.end}-{export.pk.hex[:8]}.xlsx"

        def progress(done: int) -> None:
            ReportExport.objects.filter(pk=export.pk).update(rows_done=done)

        ordered = rows.order_by("day", "workspace_id", "job_id", "node", "id").values_list(*exports.FIELDS)
        exports.write_xlsx(export_dir() / name, exports.raw_rows(ordered, chunk_size=5000), totals=totals,
                           progress=progress)
    except Exception as error:
        ReportExport.objects.filter(pk=export.pk).update(state=ReportExport.State.FAILED, error=str(error),
                                                         finished=clock.now())
        raise
    ReportExport.objects.filter(pk=export.pk).update(state=ReportExport.State.DONE, file_name=name,
                                                     finished=clock.now())
    return name
