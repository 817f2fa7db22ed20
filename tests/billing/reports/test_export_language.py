"""The Excel files are for people: their sheet names and Totals labels follow the reader's language (the
language they asked in; the export is built later, by a worker). Their cost columns and the CSV files are
the FOCUS data contract and stay English in every language."""

import csv
import io

import openpyxl
from asgiref.sync import async_to_sync
from django.test import AsyncClient, Client

from billing.models import ReportExport
from billing.reports import exports
from billing.reports.tasks import build_excel_export
from portal.models import UserPreference

RANGE = {"start": "2026-03-01", "end": "2026-03-08"}


def excel(user, settings, tmp_path, language=None):
    settings.REPORT_EXPORT_DIR = tmp_path
    client = Client()
    client.force_login(user)
    export_id = client.post("/reports/exports/", RANGE, HTTP_ACCEPT="application/json",
                            HTTP_ACCEPT_LANGUAGE=language or "en").json()["id"]
    build_excel_export(export_id)
    status = client.get(f"/reports/exports/{export_id}/").json()
    content = b"".join(client.get(status["download_url"]).streaming_content)
    return ReportExport.objects.get(pk=export_id), openpyxl.load_workbook(io.BytesIO(content), read_only=True)


def test_a_chinese_readers_excel_export_has_chinese_sheets_and_labels_and_english_columns(usage, settings, tmp_path):
    UserPreference.objects.create(user=usage.tenants.finance, language="zh-hans")
    export, book = excel(usage.tenants.finance, settings, tmp_path)
    assert export.filters["language"] == "zh-hans"
    assert book.sheetnames == ["费用", "汇总"]
    rows = list(book["费用"].iter_rows(values_only=True))
    assert list(rows[0]) == exports.HEADER  # BilledCost, ChargePeriodStart, x_JobId ...: the data contract
    summary = {label: value for label, value in book["汇总"].iter_rows(values_only=True)}
    assert set(summary) == {"币种", "合计", "数据截至", "开始日期", "结束日期"}
    assert summary["币种"] == "USD" and summary["开始日期"] == RANGE["start"]


def test_an_english_readers_export_and_an_export_of_before_read_english(usage, settings, tmp_path):
    _, book = excel(usage.tenants.finance, settings, tmp_path, language="en")
    assert book.sheetnames == ["Costs", "Totals"]
    older = ReportExport.objects.create(user=usage.tenants.finance, filters=RANGE)  # asked before languages
    build_excel_export(str(older.pk))
    older.refresh_from_db()
    book = openpyxl.load_workbook(tmp_path / older.file_name, read_only=True)
    assert book.sheetnames == ["Costs", "Totals"]


def test_the_statement_workbook_follows_the_page_and_the_csv_stays_english(usage):
    UserPreference.objects.create(user=usage.tenants.finance, language="zh-hans")
    client = Client()
    client.force_login(usage.tenants.finance)
    base = "/reports/statements/vision-lab/2026-03/"
    book = openpyxl.load_workbook(io.BytesIO(client.get(base + "statement.xlsx").content), read_only=True)
    assert book.sheetnames == ["费用", "汇总"]
    assert [label for label, _ in book["汇总"].iter_rows(values_only=True)] == [
        "工作空间", "月份", "币种", "期初余额", "合计", "期末余额", "数据截至"]
    statement_csv = client.get(base + "statement.csv").content.decode()
    assert next(csv.reader(io.StringIO(statement_csv))) == exports.HEADER

    async def report_csv():
        async_client = AsyncClient()
        await async_client.aforce_login(usage.tenants.finance)
        response = await async_client.get("/reports/export.csv", RANGE, HTTP_ACCEPT_LANGUAGE="zh-hans")
        return b"".join([chunk async for chunk in response.streaming_content]).decode()

    assert next(csv.reader(io.StringIO(async_to_sync(report_csv)()))) == exports.HEADER
