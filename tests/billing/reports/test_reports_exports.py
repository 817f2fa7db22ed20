"""CSV streams (first bytes before the last row is read); Excel opens and its totals match the page."""

import csv
import io
import time
from datetime import timedelta
from decimal import Decimal

import openpyxl
import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient, Client
from tests_reports_helpers import DAY, make_usage

from billing.models import ReportExport, UsageDay
from billing.reports import exports
from billing.reports import selectors as reports
from billing.reports.tasks import build_excel_export

RANGE = {"start": "2026-03-01", "end": "2026-03-08"}


def test_csv_chunks_come_out_before_the_source_is_read_to_the_end():
    read = []

    async def source():
        for i in range(10):
            read.append(i)
            yield (DAY, "ws", "q", i, f"job-{i}", "n", "H100", "exclusive", *[Decimal("1.5")] * 7, "USD")

    async def consume():
        stream = exports.csv_chunks(source(), chunk_rows=4)
        header = await anext(stream)
        seen = [len(read)]
        first_rows = await anext(stream)
        seen.append(len(read))
        rest = [chunk async for chunk in stream]
        return header, first_rows, seen, rest

    header, first_rows, seen, rest = async_to_sync(consume)()
    assert header.decode().startswith("date,workspace,queue,job_id,job,node,gpu_model,sharing_mode")
    assert seen == [0, 4]  # the header before any row, four rows before the fifth is read
    assert first_rows.decode().count("\r\n") == 4 and "job-9" not in first_rows.decode()
    assert len(rest) == 2 and "job-9" in rest[-1].decode() and len(read) == 10


def _many_rows(usage, count):
    template = UsageDay.objects.filter(workspace=usage.tenants.vision).first()
    UsageDay.objects.bulk_create([
        UsageDay(day=DAY + timedelta(days=1 + i % 5), workspace=template.workspace, queue=template.queue,
                 job=template.job, job_name=f"bulk-{i:04d}", node=f"node-{i}", gpu_model=template.gpu_model,
                 sharing="exclusive", allocated_gpu_hours=Decimal("0.25"), used_gpu_hours=Decimal("0.1"),
                 idle_gpu_hours=Decimal("0.15"), cost=Decimal("0.75"), currency="USD")
        for i in range(count)
    ])


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
    assert response["Content-Type"] == "text/csv"
    assert first.decode().startswith("date,") and first.decode().count("\r\n") == 1
    assert second.decode().count("\r\n") == 100 and "bulk-0349" not in second.decode()
    body = b"".join([first, second, *rest]).decode()
    assert len(rest) == 3 and "bulk-0349" in rest[-1].decode()
    assert len(list(csv.DictReader(io.StringIO(body)))) == 354


def test_excel_opens_and_its_totals_equal_the_page(usage, settings, tmp_path):
    settings.REPORT_EXPORT_DIR = tmp_path
    _many_rows(usage, 40)
    client = Client()
    client.force_login(usage.tenants.finance)
    page_totals = client.get("/reports/", RANGE).context["totals"]
    assert len(page_totals) == 1
    export_id = client.post("/reports/exports/", RANGE, HTTP_ACCEPT="application/json").json()["id"]
    build_excel_export(export_id)
    status = client.get(f"/reports/exports/{export_id}/").json()
    download = client.get(status["download_url"])
    book = openpyxl.load_workbook(io.BytesIO(b"".join(download.streaming_content)), read_only=True)
    assert book.sheetnames == ["Report", "Totals"]
    rows = list(book["Report"].iter_rows(values_only=True))
    header, body = rows[0], rows[1:]
    assert list(header) == exports.HEADER and len(body) == page_totals[0].rows == 44
    col = {name: i for i, name in enumerate(header)}
    for name, field in [("final_cost", "cost"), ("gpu_hours_allocated", "allocated_gpu_hours"),
                        ("estimated_cost", "estimated_cost"), ("idle_allocated_gpu_hours", "idle_gpu_hours")]:
        assert round(sum(r[col[name]] for r in body), 6) == round(float(getattr(page_totals[0], field)), 6)
    summary = dict(zip(*list(book["Totals"].iter_rows(values_only=True)), strict=True))
    assert summary["final_cost"] == float(page_totals[0].cost) and summary["rows"] == 44
    assert summary["currency"] == "USD"


def test_excel_starts_a_new_sheet_when_one_is_full(usage, tmp_path):
    rows = reports.report_rows(usage.tenants.finance, reports.parse_filters(RANGE, today=DAY))
    path = tmp_path / "split.xlsx"
    seen = []
    written = exports.write_xlsx(path, exports.raw_rows(rows.values_list(*exports.FIELDS)), max_rows=3,
                                 progress=seen.append, every=1, totals=reports.totals(rows))
    book = openpyxl.load_workbook(path, read_only=True)
    assert book.sheetnames == ["Report", "Report 2", "Totals"]
    assert [book[s].max_row for s in ("Report", "Report 2")] == [3, 3]  # header + 2 rows each
    assert written == 4 and seen[-1] == 4 and seen[:4] == [1, 2, 3, 4]


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
    assert status["state"] == "done" and status["rows_done"] == status["rows_total"] == 4
    book = openpyxl.load_workbook(io.BytesIO(b"".join(client.get(status["download_url"]).streaming_content)))
    assert book["Report"].max_row == 5
