"""Operators' prices in each currency that has a price timeline, never one total of two: unallocated
capacity priced once per currency (with its totals per currency), the capacity planner's costs and the
GPU advice in the currency the operator picks (the platform's by default)."""

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from billing.reports import capacity
from billing.selectors import price_currencies
from portal.console import planner_services
from portal.console import selectors as console_selectors
from portal.console.models import PlannerRun
from tests.factories import GpuRateFactory, PriceTableFactory

D = date(2026, 3, 10)  # TIME_ZONE is UTC here (tests/billing/conftest.py)


def at(day: date, hour: int = 0) -> datetime:
    return datetime(day.year, day.month, day.day, hour, tzinfo=UTC)


@pytest.fixture
def yuan(cluster):
    table = PriceTableFactory(name="人民币价目表", currency="CNY", effective_from=datetime(2020, 1, 1, tzinfo=UTC),
                              offpeak_windows="23:00-07:00", offpeak_time_zone="Asia/Shanghai")
    GpuRateFactory(table=table, vendor="nvidia", gpu_model="H100-80GB", per_gpu_hour=Decimal("21.60"))
    return table


def test_the_platforms_currency_comes_first(cluster, yuan):
    assert price_currencies() == ["USD", "CNY"]


def test_unallocated_capacity_is_priced_in_each_currency_and_totalled_per_currency(cluster, yuan):
    rows = capacity.unallocated_by_pool_day(D, D, now=at(date(2026, 3, 11)))
    h100 = {r.currency: r for r in rows if r.pool == "h100"}
    assert set(h100) == {"USD", "CNY"}
    assert h100["USD"].list_cost == Decimal(16 * 24 * 3) and h100["CNY"].list_cost == Decimal("8294.40")  # 384 x 21.60
    assert h100["USD"].unallocated_gpu_hours == h100["CNY"].unallocated_gpu_hours == Decimal(16 * 24)
    rtx = {r.currency: r for r in rows if r.pool == "rtx4090"}
    # the CNY table prices no RTX 4090: its hours are unpriced, never 0.00
    assert rtx["CNY"].list_cost is None and rtx["CNY"].reason == "pool_not_priced"
    assert rtx["CNY"].unpriced_gpu_hours == rtx["CNY"].unallocated_gpu_hours == Decimal(8 * 24)
    assert "no rate for nvidia RTX-4090-24GB in the CNY price table" in rtx["CNY"].reason_text
    assert rtx["USD"].reason == "" and rtx["USD"].unpriced_gpu_hours == 0
    totals = {t["currency"]: t for t in capacity.totals_by_currency(rows, "unallocated_gpu_hours", "list_cost")}
    assert totals["CNY"]["list_cost"] == sum(r.list_cost or 0 for r in rows if r.currency == "CNY") > Decimal("8294.40")
    assert totals["USD"]["list_cost"] == sum(r.list_cost for r in rows if r.currency == "USD")


def test_the_capacity_page_shows_each_currencys_total(client, cluster, yuan, clock):
    clock.now = at(D, 18)
    client.force_login(cluster.admin)
    page = client.get(f"/console/capacity/?start={D}&end={D}").content.decode()
    rows = capacity.unallocated_by_pool_day(D, D, now=at(D, 18))
    for t in capacity.totals_by_currency(rows, "unallocated_gpu_hours", "list_cost"):
        assert f"{t['list_cost']:,}" in page
    assert "¥6,220.80" in page and " CNY<" not in page  # h100: 16 GPUs x 18 hours x 21.60
    rtx = page.split(f'data-day="{D}" data-pool="rtx4090"')[2].split("</tr>")[0]  # the CNY row comes second
    assert 'data-reason="pool_not_priced"' in rtx and "¥0.00" not in rtx


def test_the_planner_prices_its_replay_in_the_chosen_currency(cluster, yuan, clock):
    clock.now = at(D, 12)
    inputs = planner_services.actual_inputs(planner_services.cluster_snapshot()) | {
        "days": 1, "checkpoint_min": 30, "preemption": True, "trace_queue": ""}
    for currency in ("CNY", None):
        run = PlannerRun.objects.create(kind="whatif", inputs=inputs | ({"currency": currency} if currency else {}))
        assert planner_services.execute_run(run.pk)
        run.refresh_from_db()
        assert run.results["actual"]["total"]["currency"] == (currency or "USD")


def test_the_gpu_advice_prices_in_the_chosen_currency(client, cluster, yuan, clock):
    clock.now = at(D, 12)
    _, options, _ = console_selectors.gpu_advice("7", "inference", "fp16", currency="CNY")
    h100 = [o for o in options if o.pool == "h100"]
    assert h100 and {o.currency for o in options} == {"CNY"}
    _, options, _ = console_selectors.gpu_advice("7", "inference", "fp16")
    assert {o.currency for o in options} == {"USD"}
    client.force_login(cluster.admin)
    page = client.get("/console/advice/?params_b=7&task=inference&precision=fp16&currency=CNY").content.decode()
    assert "CNY" in page and '<option value="CNY" selected>' in page
    refused = client.get("/console/advice/?params_b=7&task=inference&precision=fp16&currency=EUR")
    assert refused.status_code == 400
