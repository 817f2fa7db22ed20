"""CSV streams (first bytes before the last row is read) in FOCUS columns, money with exactly two
decimals adding up to the page's total; Excel opens and its totals match the page."""

import csv
import io
import re
import time
from datetime import timedelta
from decimal import Decimal

import openpyxl
import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient, Client
from tests_reports_helpers import DAY, RANGE, at, csv_body, make_usage

from billing.ledger.services import add_adjustment
from billing.models import ChargeLine, LedgerRevision, ReportExport
from billing.reports import exports
from billing.reports import selectors as reports
from billing.reports.tasks import build_excel_export

TWO_DECIMALS = re.compile(r"^-?\d+\.\d{2}$")


def test_csv_chunks_come_out_before_the_source_is_read_to_the_end():
    read = []

    async def source():
        for i in range(10):
            read.append(i)
            yield [f"job-{i}", *["1.50"] * (len(exports.HEADER) - 1)]

    async def consume():
        stream = exports.csv_chunks(source(), chunk_rows=4)
        header = await anext(stream)
        seen = [len(read)]
        first_rows = await anext(stream)
        seen.append(len(read))
        rest = [chunk async for chunk in stream]
        return header, first_rows, seen, rest

    header, first_rows, seen, rest = async_to_sync(consume)()
    assert header.decode() == ",".join(exports.HEADER) + "\r\n"
    assert header.decode().startswith("BilledCost,BillingAccountId,BillingAccountName,BillingCurrency,")
    assert seen == [0, 4]  # the header before any row, four rows before the fifth is read
    assert first_rows.decode().count("\r\n") == 4 and "job-9" not in first_rows.decode()
    assert len(rest) == 2 and "job-9" in rest[-1].decode() and len(read) == 10


def _many_rows(usage, count):
    """`count` more lines of 0.75 each, on the five days after DAY."""
    template = ChargeLine.objects.filter(job=usage.vision_job).first()
    lines = []
    for i in range(count):
        hour = at(DAY + timedelta(days=1 + i % 5), 12)
        lines.append(ChargeLine(
            hour=hour, day=hour.date(), period=template.period, charge_start=hour, charge_end=hour + timedelta(hours=1),
            workspace=template.workspace, queue=template.queue, job=template.job, job_name=f"bulk-{i:04d}",
            node=f"node-{i}", gpu_model=template.gpu_model, sharing="exclusive", price_table=template.price_table,
            allocated_gpu_hours=Decimal("0.25"), used_gpu_hours=Decimal("0.1"), idle_gpu_hours=Decimal("0.15"),
            cost=Decimal("0.75"), list_cost=Decimal("0.76"), exclusive_cost=Decimal("0.76"), currency="USD",
            provisional=False, computed_at=hour))
    ChargeLine.objects.bulk_create(lines)
    LedgerRevision.bump()  # as the ledger's own bulk posting does: sums kept for the old ledger are not read


def test_the_csv_view_streams_chunk_by_chunk(usage, monkeypatch):
    _many_rows(usage, 350)
    monkeypatch.setattr(exports, "CSV_CHUNK_ROWS", 100)
    client = AsyncClient()
    client.force_login(usage.tenants.finance)

    async def consume():
        response = await client.get("/reports/export.csv", RANGE)
        assert response.streaming and response.is_async
        stream = aiter(response.streaming_content)
        first, second = await anext(stream), await anext(stream)
        rest = [chunk async for chunk in stream]
        return response, first, second, rest

    response, first, second, rest = async_to_sync(consume)()
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert first.decode() == ",".join(exports.HEADER) + "\r\n"
    assert second.decode().count("\r\n") == 100 and "bulk-0349" not in second.decode()
    body = b"".join([first, second, *rest]).decode()
    assert len(rest) == 3 and "bulk-0349" in rest[-1].decode()
    assert len(list(csv.DictReader(io.StringIO(body)))) == 359  # 350 + the fixture's 9 lines


def test_csv_money_has_two_decimals_and_adds_up_to_the_page_total(usage):
    """The fixture's lines (15.32, see test_reports_ledger) and a credit of 2.50 on DAY: 12.82."""
    add_adjustment(user=usage.tenants.finance, workspace=usage.tenants.vision, amount="-2.50",
                   reason="a GPU was faulty", now=at(DAY, 20, 15))
    rows = list(csv.DictReader(io.StringIO(csv_body(usage.tenants.finance))))
    assert len(rows) == 10
    for row in rows:
        for column in exports.MONEY_COLUMNS:
            assert TWO_DECIMALS.match(row[column]), (column, row[column])
    billed = sum(Decimal(row["BilledCost"]) for row in rows)
    client = Client()
    client.force_login(usage.tenants.finance)
    (page_total,) = client.get("/reports/", RANGE).context["totals"]
    assert billed == page_total.cost == Decimal("12.82")
    (credit,) = [row for row in rows if row["ChargeCategory"] == "Credit"]
    assert credit["BilledCost"] == "-2.50" and credit["x_Reason"] == "a GPU was faulty"
    assert credit["x_Author"] == "finance" and credit["BillingAccountId"] == "vision-lab"
    train = [row for row in rows if row["x_JobName"] == "vision-train"]
    assert [row["BilledCost"] for row in train] == ["1.82", "3.04", "3.04"]
    assert [row["ChargePeriodStart"] for row in train] == [
        "2026-03-02T07:00:00Z", "2026-03-02T08:00:00Z", "2026-03-02T09:00:00Z"]
    assert {row["BillingCurrency"] for row in rows} == {"USD"}


def test_csv_grouped_by_day_gives_the_daily_sums(usage):
    rows = list(csv.DictReader(io.StringIO(csv_body(usage.tenants.finance, group_by="day"))))
    assert list(rows[0]) == exports.grouped_header(("day",))
    assert [(row["day"], row["cost"], row["allocated_gpu_hours"]) for row in rows] == [
        ("2026-03-02", "14.82", "6.000000"), ("2026-03-03", "0.50", "1.000000")]


def test_excel_opens_and_its_totals_equal_the_page(usage, settings, tmp_path):
    settings.REPORT_EXPORT_DIR = tmp_path
    _many_rows(usage, 40)
    client = Client()
    client.force_login(usage.tenants.finance)
    page_totals = client.get("/reports/", RANGE).context["totals"]
    assert len(page_totals) == 1 and page_totals[0].cost == Decimal("45.32")  # 15.32 + 40 x 0.75
    export_id = client.post("/reports/exports/", RANGE, HTTP_ACCEPT="application/json").json()["id"]
    build_excel_export(export_id)
    status = client.get(f"/reports/exports/{export_id}/").json()
    download = client.get(status["download_url"])
    book = openpyxl.load_workbook(io.BytesIO(b"".join(download.streaming_content)), read_only=True)
    assert book.sheetnames == ["Costs", "Totals"]
    rows = list(book["Costs"].iter_rows(values_only=True))
    header, body = rows[0], rows[1:]
    assert list(header) == exports.HEADER and len(body) == page_totals[0].rows == 49
    col = {name: i for i, name in enumerate(header)}
    for name, field in [("BilledCost", "cost"), ("ListCost", "list_cost"), ("x_ExclusiveCost", "exclusive_cost"),
                        ("x_AllocatedGpuHours", "allocated_gpu_hours"), ("x_IdleGpuHours", "idle_gpu_hours")]:
        assert round(sum(r[col[name]] for r in body), 6) == round(float(getattr(page_totals[0], field)), 6), name
    summary = {label: value for label, value in book["Totals"].iter_rows(values_only=True)}
    assert Decimal(summary["Total"]) == page_totals[0].cost and summary["Currency"] == "USD"
    assert (summary["From"], summary["To"]) == (RANGE["start"], RANGE["end"])


def test_excel_starts_a_new_sheet_when_one_is_full(usage, tmp_path):
    rows = reports.report_rows(usage.tenants.finance, reports.parse_filters(RANGE, today=DAY))
    path = tmp_path / "split.xlsx"
    seen = []
    written = exports.write_xlsx(path, exports.line_rows(rows), max_rows=4, progress=seen.append, every=1,
                                 total=[("Total", reports.money_sum(rows))])
    book = openpyxl.load_workbook(path, read_only=True)
    assert book.sheetnames == ["Costs", "Costs 2", "Costs 3", "Totals"]
    assert [book[s].max_row for s in ("Costs", "Costs 2", "Costs 3")] == [4, 4, 4]  # header + 3 rows each
    assert written == 9 and seen[-1] == 9 and seen[:9] == list(range(1, 10))
    assert [[cell.value for cell in row] for row in book["Totals"].iter_rows()] == [["Total", "15.32"]]


@pytest.mark.django_db(transaction=True)
def test_a_real_celery_worker_builds_the_excel_file_with_progress(cluster, celery_worker_queue):
    """The task runs in a worker process; the status endpoint reports progress, then the link."""
    make_usage(cluster)
    client = Client()
    client.force_login(cluster.finance)
    export = ReportExport.objects.create(user=cluster.finance, filters=RANGE)
    build_excel_export.apply_async(args=[str(export.pk)], queue=celery_worker_queue)
    deadline = time.monotonic() + 60
    while (status := client.get(f"/reports/exports/{export.pk}/").json())["state"] not in ("done", "failed"):
        assert time.monotonic() < deadline, status
        time.sleep(0.2)
    assert status["state"] == "done" and status["rows_done"] == status["rows_total"] == 9
    book = openpyxl.load_workbook(io.BytesIO(b"".join(client.get(status["download_url"]).streaming_content)))
    assert book["Costs"].max_row == 10


def test_an_export_asked_for_while_the_broker_is_away_waits_and_is_sent_again(
        usage, monkeypatch, django_capture_on_commit_callbacks, settings, tmp_path):
    """The broker (Redis) is down when the user asks: the page answers, the export stays queued,
    and the beat's resend builds it once the broker is back; a late duplicate builds nothing."""
    from kombu.exceptions import OperationalError

    from billing.models import ReportExport
    from billing.reports import services as report_services
    from portal.celery import app

    def broker_away(name, args=(), **options):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    settings.REPORT_EXPORT_DIR = tmp_path
    client = Client()
    client.force_login(usage.tenants.finance)
    monkeypatch.setattr(app, "send_task", broker_away)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/reports/exports/", RANGE, HTTP_ACCEPT="application/json")
    assert response.status_code < 300, response.content
    export = ReportExport.objects.get(pk=response.json()["id"])
    assert export.state == ReportExport.State.QUEUED

    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args=(), **options: sent.append((name, *args)))
    later = export.created + report_services.EXPORT_RESEND_AFTER + timedelta(seconds=1)
    assert report_services.resend_waiting_exports(now=export.created) == 0  # not yet overdue
    assert report_services.resend_waiting_exports(now=later) == 1 and sent == [(report_services.BUILD_EXCEL_EXPORT, str(export.pk))]
    name = build_excel_export(str(export.pk))
    assert build_excel_export(str(export.pk)) == name  # the duplicate finds it taken
    export.refresh_from_db()
    assert export.state == ReportExport.State.DONE and export.file_name == name
    assert report_services.resend_waiting_exports(now=later) == 0
