"""Consolidation: a USD and a CNY workspace's costs in one USD report equal the sum of the converted lines,
in the costs API (every grouping), the FOCUS CSV export and the statement; each converted line keeps its
original cost, currency and rate; a missing rate is a 422 problem naming the day and the pair."""

import csv
import io
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient, Client

from billing.exchange_rates import add_rate
from billing.models import WorkspaceCurrency
from billing.pricing import quantize_money

pytestmark = pytest.mark.django_db
RANGE = {"start": "2026-03-01", "end": "2026-03-31"}
EUR_USD = {date(2026, 3, 2): Decimal("1.08"), date(2026, 3, 3): Decimal("1.09"), date(2026, 3, 31): Decimal("1.10")}
EUR_CNY = {date(2026, 3, 2): Decimal("7.80"), date(2026, 3, 3): Decimal("7.85"), date(2026, 3, 31): Decimal("7.90")}


def cny_in_usd(day: date) -> Decimal:
    return (EUR_USD[day] / EUR_CNY[day]).quantize(Decimal("1e-10"))


@pytest.fixture
def month(tenants, clock, line):
    """vision-lab in USD, nlp-group in CNY; lines on the 2nd and 3rd with awkward cents."""
    clock.now = datetime(2026, 3, 31, 12, tzinfo=UTC)
    WorkspaceCurrency.objects.create(workspace=tenants.nlp, period=date(1970, 1, 1), currency="CNY",
                                     set_at=clock.now)
    for day in EUR_USD:
        add_rate(base="EUR", quote="USD", day=day, rate=EUR_USD[day])
        add_rate(base="EUR", quote="CNY", day=day, rate=EUR_CNY[day])
    lines = [
        line(workspace=tenants.vision, day=date(2026, 3, 2), cost=Decimal("3.04")),
        line(workspace=tenants.vision, day=date(2026, 3, 3), cost=Decimal("2.03")),
        line(workspace=tenants.nlp, day=date(2026, 3, 2), cost=Decimal("21.07"), currency="CNY"),
        line(workspace=tenants.nlp, day=date(2026, 3, 2), cost=Decimal("0.33"), currency="CNY"),
        line(workspace=tenants.nlp, day=date(2026, 3, 3), cost=Decimal("14.15"), currency="CNY"),
    ]
    return lines


def converted(lines) -> list[Decimal]:
    """Each line in USD at its day's rate, rounded once: worked out here, not by the code under test."""
    return [quantize_money(x.cost * (cny_in_usd(x.day) if x.currency == "CNY" else 1), "USD") for x in lines]


def export(user, **params):
    """The report's CSV export: (status, body) read from its stream."""
    client = AsyncClient()
    client.force_login(user)

    async def fetch():
        response = await client.get("/reports/export.csv", {**RANGE, **params})
        if not response.streaming:
            return response.status_code, response.content.decode()
        return response.status_code, b"".join([chunk async for chunk in response.streaming_content]).decode()

    return async_to_sync(fetch)()


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("group_by", ["day", "workspace", "user", "queue", "gpu_model", "job"])
def test_a_consolidated_usd_report_equals_the_sum_of_the_converted_lines(tenants, month, group_by):
    expected = sum(converted(month), Decimal(0))
    body = client_of(tenants.finance).get("/api/v1/costs/", {**RANGE, "currency": "USD", "group_by": group_by}).json()
    assert body["currency"] == "USD" and body["totals"] == [{"currency": "USD", "total": str(expected)}]
    assert sum(Decimal(r["cost"]) for r in body["rows"]) == expected == Decimal(body["total"])
    assert {r["currency"] for r in body["rows"]} == {"USD"}
    originals = {(r["x_OriginalCurrency"], r["x_OriginalCost"]) for r in body["rows"]}
    if group_by == "workspace":
        assert originals == {("USD", "5.07"), ("CNY", "35.55")}
        cny = next(r for r in body["rows"] if r["x_OriginalCurrency"] == "CNY")
        # two days at two rates: the amount-weighted one
        exact = (Decimal("21.40") * cny_in_usd(date(2026, 3, 2)) + Decimal("14.15") * cny_in_usd(date(2026, 3, 3)))
        assert Decimal(cny["x_ExchangeRate"]) == (exact / Decimal("35.55")).quantize(Decimal("1e-10"))


def test_the_focus_export_converts_each_line_and_keeps_its_original(tenants, month):
    rows = list(csv.DictReader(io.StringIO(export(tenants.finance, currency="USD")[1])))
    assert sorted(Decimal(r["BilledCost"]) for r in rows) == sorted(converted(month))
    assert {r["BillingCurrency"] for r in rows} == {"USD"}
    cny = [r for r in rows if r["x_OriginalCurrency"] == "CNY"]
    assert sorted(Decimal(r["x_OriginalCost"]) for r in cny) == [Decimal("0.33"), Decimal("14.15"), Decimal("21.07")]
    for r in cny:
        day = date.fromisoformat(r["ChargePeriodStart"][:10])
        assert Decimal(r["x_ExchangeRate"]) == cny_in_usd(day)
        assert Decimal(r["BilledCost"]) == quantize_money(Decimal(r["x_OriginalCost"]) * cny_in_usd(day), "USD")
    plain = list(csv.DictReader(io.StringIO(export(tenants.finance)[1])))
    assert {r["x_OriginalCost"] + r["x_ExchangeRate"] + r["x_OriginalCurrency"] for r in plain} == {""}


def test_the_statement_consolidates_too(tenants, month):
    response = client_of(tenants.bob).get("/reports/statements/nlp-group/2026-03/statement.csv", {"currency": "USD"})
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert sorted(Decimal(r["BilledCost"]) for r in rows) == sorted(converted(month[2:]))


def test_the_period_end_rule_converts_the_month_at_its_last_day(tenants, month, settings):
    settings.BILLING_FX_RATE_DAY = "period-end"
    body = client_of(tenants.bob).get("/api/v1/costs/", {**RANGE, "currency": "USD", "group_by": "workspace"}).json()
    [row] = body["rows"]
    assert row["x_ExchangeRate"] == str(cny_in_usd(date(2026, 3, 31)))
    assert row["cost"] == str(sum((quantize_money(x.cost * cny_in_usd(date(2026, 3, 31)), "USD") for x in month[2:]),
                                  Decimal(0)))


def test_a_missing_rate_is_a_problem_naming_the_day_and_the_pair(tenants, month, line, settings):
    settings.BILLING_FX_LOOKBACK_DAYS = 2
    line(workspace=tenants.nlp, day=date(2026, 3, 20), cost=Decimal("1.00"), currency="CNY")
    response = client_of(tenants.finance).get("/api/v1/costs/", {**RANGE, "currency": "USD"})
    assert response.status_code == 422 and response["Content-Type"] == "application/problem+json"
    assert "CNY to USD" in response.json()["detail"] and "2026-03-20" in response.json()["detail"]
    status, body = export(tenants.finance, currency="USD")
    assert status == 422 and "2026-03-20" in body  # refused before the first byte, not a half-written file


def test_an_unknown_reporting_currency_is_refused_by_field(tenants, month):
    response = client_of(tenants.finance).get("/api/v1/costs/", {**RANGE, "currency": "XXX"})
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "currency"


def test_the_reports_page_and_the_statement_show_the_consolidated_total(tenants, month):
    expected = sum(converted(month), Decimal(0))
    page = client_of(tenants.finance).get("/reports/", {**RANGE, "currency": "USD"})
    assert page.status_code == 200 and page.context["consolidated"] == expected
    assert 'id="consolidated-total" data-currency="USD"' in page.content.decode()
    statement = client_of(tenants.bob).get("/reports/statements/nlp-group/2026-03/", {"currency": "USD"})
    assert statement.context["consolidated"] == sum(converted(month[2:]), Decimal(0))
    assert "statement.csv?currency=USD" in statement.content.decode()


def test_a_page_without_a_rate_is_refused_naming_it(tenants, month, line, settings):
    settings.BILLING_FX_LOOKBACK_DAYS = 0
    line(workspace=tenants.nlp, day=date(2026, 3, 4), cost=Decimal("1.00"), currency="CNY")
    page = client_of(tenants.finance).get("/reports/", {**RANGE, "currency": "USD"})
    assert page.status_code == 422 and "2026-03-04" in page.content.decode()
