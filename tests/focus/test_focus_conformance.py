"""Every cost export passes the FOCUS checker (tests/focus/focus_checker.py): the report's CSV and Excel
exports, the statement's CSV and Excel files, each also consolidated into another currency, and the costs
API in every grouping; each of them also once the month's idle capacity is charged back (idle-share lines).
The checker itself is shown to catch what it is for."""

import csv
import io
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

import openpyxl
import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from billing import chargeback
from billing.exchange_rates import add_rate
from billing.models import ChargeLine, LedgerCursor
from billing.reports import exports
from billing.reports.tasks import build_excel_export, export_dir
from scheduling.models import NodePool
from tests.billing.ledger.test_same_cents_everywhere import GROUPS, RANGE
from tests.focus.focus_checker import check_api, check_header, check_rows

pytestmark = pytest.mark.django_db
PRICING_QUANTITY = "PricingQuantity"


@pytest.fixture
def rates(month):
    """EUR rates of every day of March, so the month can be consolidated into CNY."""
    for n in range(31):
        day = date(2026, 3, 1) + timedelta(days=n)
        add_rate(base="EUR", quote="USD", day=day, rate=Decimal("1.08") + Decimal(n) / 1000)
        add_rate(base="EUR", quote="CNY", day=day, rate=Decimal("7.80") + Decimal(n) / 100)


@pytest.fixture(params=["usage", "idle-share"])
def ledger(request, month, clock):
    """The month as it is billed, or also charged back: its h100 and a100-spot pools' idle capacity posted
    proportionally as idle-share lines, once the month is final."""
    if request.param == "idle-share":
        for pool in ("h100", "a100-spot"):
            chargeback.save_policy(NodePool.objects.get(name=pool), "proportional")
        final = datetime(2026, 4, 1, 1, tzinfo=UTC)
        LedgerCursor.objects.update_or_create(pk=1, defaults={"closed_until": final, "posted_until": final})
        assert chargeback.post_chargeback(date(2026, 3, 1), now=datetime(2026, 4, 2, tzinfo=UTC))
    return request.param


def kinds(rows) -> set[str]:
    return {r["x_ChargeKind"] for r in rows} - {"", None}


def csv_dicts(text: str) -> tuple[list[str], list[dict]]:
    reader = csv.DictReader(io.StringIO(text))
    return list(reader.fieldnames or []), list(reader)


def xlsx_dicts(path_or_bytes) -> tuple[list[str], list[dict]]:
    book = openpyxl.load_workbook(io.BytesIO(path_or_bytes) if isinstance(path_or_bytes, bytes) else path_or_bytes)
    sheet = book.worksheets[0]
    values = list(sheet.iter_rows(values_only=True))
    header = list(values[0])
    return header, [dict(zip(header, row, strict=True)) for row in values[1:]]


def report_csv(user, **params) -> str:
    client = AsyncClient()
    client.force_login(user)

    async def fetch():
        response = await client.get("/reports/export.csv", {**RANGE, **params})
        assert response.status_code == 200
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(fetch)().decode()


def assert_conforms(header, rows, *, text=True, currency=None):
    assert rows, "no rows to check"
    assert check_header(header) == [] and header == exports.HEADER
    assert check_rows(rows, text=text) == []
    if not text:  # a null is an empty cell, never an empty string
        assert not [(name, r["x_JobId"]) for r in rows for name, value in r.items() if value == ""]
    if currency:
        assert {r["BillingCurrency"] for r in rows} == {currency}
        assert all(r["x_OriginalCurrency"] == "USD" for r in rows)


@pytest.mark.parametrize("currency", ["", "CNY"])
def test_the_report_exports_conform(ledger, rates, client, cluster, currency):
    header, rows = csv_dicts(report_csv(cluster.finance, currency=currency))
    assert_conforms(header, rows, currency=currency)
    assert kinds(rows) == {"usage", ledger}
    assert {r["ChargeCategory"] for r in rows} == {"Usage", "Credit"} and {r["ServiceCategory"] for r in rows} == {
        "AI and Machine Learning", "Storage"}
    client.force_login(cluster.finance)
    started = client.post("/reports/exports/", {**RANGE, "currency": currency}, HTTP_ACCEPT="application/json").json()
    header, cells = xlsx_dicts(export_dir() / build_excel_export(started["id"]))
    assert_conforms(header, cells, text=False, currency=currency)
    assert len(cells) == len(rows) and kinds(cells) == kinds(rows)


def report_xlsx(client, user, **params) -> tuple[list[str], list[dict]]:
    client.force_login(user)
    response = client.get("/reports/export.xlsx", {**RANGE, **params})
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"].startswith("application/vnd.openxmlformats")
    return xlsx_dicts(response.content)


@pytest.mark.parametrize("currency", ["", "CNY"])
def test_the_direct_excel_export_takes_the_csv_parameters(month, rates, client, cluster, currency):
    _, rows = csv_dicts(report_csv(cluster.finance, currency=currency))
    header, cells = report_xlsx(client, cluster.finance, currency=currency)
    assert_conforms(header, cells, text=False, currency=currency)
    assert [(c["BilledCost"], c["ListCost"], c["SkuPriceId"] or None) for c in cells] == [
        (float(r["BilledCost"]), float(r["ListCost"]), r["SkuPriceId"] or None) for r in rows]
    # a grouping, as the CSV's group_by gives it
    grouped_header, grouped = csv_dicts(report_csv(cluster.finance, group_by="queue"))
    header, cells = report_xlsx(client, cluster.finance, group_by="queue")
    assert header == grouped_header and len(cells) == len(grouped)
    assert [c["cost"] for c in cells] == [float(r["cost"]) for r in grouped]


def test_the_direct_excel_export_is_scoped_and_refuses_bad_filters(month, client, cluster):
    client.force_login(cluster.bob)  # not in vision-lab
    assert client.get("/reports/export.xlsx", RANGE).status_code == 404
    client.force_login(cluster.finance)
    assert client.get("/reports/export.xlsx", {**RANGE, "start": "March"}).status_code == 400


def test_every_usage_row_is_priced_so_its_costs_are_unit_price_times_quantity(month, cluster):
    """A compute line's price per GPU-hour includes the cores and memory its slice held (the ledger bills them
    on the same line), so ListCost = ListUnitPrice x PricingQuantity, ContractedCost likewise, to the cent."""
    _, rows = csv_dicts(report_csv(cluster.finance))
    usage = [r for r in rows if r["ChargeCategory"] == "Usage"]
    assert usage and all(r["ListUnitPrice"] and r["PricingQuantity"] for r in usage)
    for r in usage:
        for price, cost in (("ListUnitPrice", "ListCost"), ("ContractedUnitPrice", "ContractedCost")):
            product = Decimal(r[price]) * Decimal(r[PRICING_QUANTITY])
            assert product.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP) == Decimal(r[cost]), r
    # the cores and memory are in the price: 1 GPU-hour of H100 at 3.00 with its CPU and memory
    assert any(r["PricingQuantity"] == "1.000000" and Decimal(r["ListUnitPrice"]) > 3 for r in usage)
    assert {r["ResourceType"] for r in usage if r["ResourceId"]} >= {"Training job", "Volume"}


def test_lines_without_gpus_and_idle_shares_are_priced_too(month, cluster):
    line = ChargeLine.objects.filter(workspace=cluster.vision, resource="compute").first()
    cpu_only = ChargeLine.objects.create(**{**_fields(line), "allocated_gpu_hours": 0, "used_gpu_hours": 0,
                                            "idle_gpu_hours": 0, "exclusive_gpu_hours": 0, "gpu_model": "",
                                            "sku_id": "", "cpu_core_hours": Decimal("4"),
                                            "memory_gib_hours": Decimal("16"), "list_cost": Decimal("0.16"),
                                            "cost": Decimal("0.16"), "exclusive_cost": Decimal("0.16")})
    ChargeLine.objects.create(**{**_fields(line), "job_id": None, "job_name": "", "node": "", "charge_kind": "idle-share",
                                 "allocated_gpu_hours": 0, "used_gpu_hours": 0, "idle_gpu_hours": 0,
                                 "cpu_core_hours": 0, "memory_gib_hours": 0, "list_cost": 0, "exclusive_cost": 0,
                                 "cost": Decimal("7.77"), "sku_id": "h100/idle-share"})
    header, rows = csv_dicts(report_csv(cluster.finance))
    assert_conforms(header, rows)
    [cpu] = [r for r in rows if r["x_JobId"] == str(cpu_only.job_id) and r["PricingUnit"] == "Core-Hours"]
    assert (cpu["PricingQuantity"], cpu["ListUnitPrice"], cpu["ListCost"]) == ("4.000000", "0.0400", "0.16")
    [share] = [r for r in rows if r["x_ChargeKind"] == "idle-share"]
    assert (share["PricingQuantity"], share["PricingUnit"], share["BilledCost"]) == ("1.000000", "Share", "7.77")
    assert share["ResourceId"] == share["ResourceType"] == ""


def _fields(line: ChargeLine) -> dict:
    return {f.attname: getattr(line, f.attname) for f in ChargeLine._meta.concrete_fields if f.attname != "id"}


@pytest.mark.parametrize("currency", ["", "CNY"])
def test_the_statement_files_conform(ledger, rates, client, cluster, currency):
    client.force_login(cluster.finance)
    params = {"currency": currency} if currency else {}
    base = "/reports/statements/vision-lab/2026-03/"
    header, rows = csv_dicts(client.get(base + "statement.csv", params).content.decode())
    assert_conforms(header, rows, currency=currency)
    assert kinds(rows) == {"usage", ledger}
    header, cells = xlsx_dicts(client.get(base + "statement.xlsx", params).content)
    assert_conforms(header, cells, text=False, currency=currency)
    assert kinds(cells) == kinds(rows)


@pytest.mark.parametrize("currency", ["", "CNY"])
def test_the_costs_api_conforms_in_every_grouping(ledger, rates, client, cluster, currency):
    client.force_login(cluster.finance)
    for group in GROUPS:
        body = client.get("/api/v1/costs/", {**RANGE, "group_by": group, **({"currency": currency} if currency else {})}
                          ).json()
        assert body["rows"] and check_api(body) == [], group
        if group == "user":
            shares = sum(Decimal(r["idle_share"]) for r in body["rows"])
            assert (shares > 0) == (ledger == "idle-share")


def test_the_checker_catches_what_it_is_for(month, cluster):
    _, rows = csv_dicts(report_csv(cluster.finance))
    row, [credit] = rows[0], [r for r in rows if r["ChargeCategory"] == "Credit"]
    assert check_rows([row, credit]) == []
    broken = [
        {**row, "EffectiveCost": str(Decimal(row["BilledCost"]) + 1)},
        {**row, "ChargeCategory": "Refund"},
        {**row, "BilledCost": "3.0"},
        {**row, "BillingCurrency": "XYZ"},
        {**row, "ChargePeriodStart": "2026-03-02 10:00"},
        {**row, "ProviderName": ""},
        {**row, "Tags": "queue=a"},
        {**row, "x_OriginalCost": "1.00"},
        {**row, "x_OriginalCost": "1.00", "x_OriginalCurrency": "CNY", "x_ExchangeRate": "0.5"},
        {**row, "ConsumedUnit": ""},
        {**row, "ListUnitPrice": "1.8000", "ContractedUnitPrice": "1.8000"},   # the CPU and memory left out
        {**row, "ContractedCost": str(Decimal(row["ContractedCost"]) + 1)},
        {**row, "ListUnitPrice": ""},
        {**row, "PricingQuantity": "", "PricingUnit": ""},
        {**row, "ResourceType": ""},
        {**row, "ResourceId": ""},
        {**row, "ListUnitPrice": "-1", "ContractedUnitPrice": "-1", "PricingQuantity": str(-Decimal(row["ListCost"]))},
        {**credit, "ListCost": "0.00"},
    ]
    for bad in broken:
        assert check_rows([bad]) != [], bad
    assert check_header([*exports.HEADER, "Colour"]) and check_header([*exports.HEADER, "x_New"])
    assert check_header(exports.HEADER[1:])
    assert check_api({"totals": [{"currency": "USD", "total": "1.00"}], "currency": "USD", "total": "1.00",
                      "rows": [{"currency": "USD", "cost": "1.5", "list_cost": "1.50", "exclusive_cost": "1.50"}]})


def test_the_report_page_links_both_files_with_its_filters(month, client, cluster):
    client.force_login(cluster.finance)
    page = client.get("/reports/", RANGE).content.decode()
    csv_link = page.split('id="export-csv" href="')[1].split('"')[0]
    xlsx_link = page.split('id="export-xlsx" href="')[1].split('"')[0]
    assert csv_link.replace("export.csv", "export.xlsx") == xlsx_link and "workspace=vision-lab" in xlsx_link
    assert client.get(xlsx_link.replace("&amp;", "&")).status_code == 200
