"""The console shows and reads times in the operator's own zone, like the tenants' pages."""

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from portal.services import set_time_zone

NOW = datetime(2026, 3, 1, 23, 30, tzinfo=UTC)
PRICES = {"name": "Spring", "currency": "USD", "cpu_core_hour": "0.03", "memory_gib_hour": "0.004",
          "priority_base": "1", "priority_step": "0.01", "offpeak_windows": "22:00-06:00",
          "offpeak_discount": "0.5", "spot_discount": "0.6", "gpu_rates": "nvidia H100-80GB 3.10"}


@pytest.fixture
def shanghai_operator(admin_client, operator, clock, settings):
    settings.TIME_ZONE = "UTC"
    clock.now = NOW
    set_time_zone(operator, "Asia/Shanghai")
    return admin_client


@pytest.mark.django_db
def test_the_usage_chart_is_drawn_in_the_operators_zone(shanghai_operator, cluster, submit):
    """plotly drops a time's UTC offset: the chart gets the operator's wall times."""
    from billing.models import ChargeLine

    job = submit(cluster, "charted")
    hour = NOW.replace(minute=0) - timedelta(hours=1)
    ChargeLine.objects.create(
        hour=hour, day=hour.date(), period=hour.date().replace(day=1), charge_start=hour,
        charge_end=hour + timedelta(hours=1), workspace=job.workspace, queue=job.queue.name, job=job,
        job_name=job.name, node="h100-01", gpu_model="H100-80GB", sharing="exclusive",
        allocated_gpu_hours=Decimal(1), used_gpu_hours=Decimal("0.5"), idle_gpu_hours=Decimal("0.5"),
        cost=Decimal(3), list_cost=Decimal(3), exclusive_cost=Decimal(3), currency="USD", provisional=False,
        computed_at=hour)
    response = shanghai_operator.get("/console/")
    (usage,) = json.loads(response.context["usage_json"])
    assert usage["hours"][-1] == "2026-03-02 07:00"  # 23:00 UTC, the last hour begun
    assert usage["allocated"][usage["hours"].index("2026-03-02 06:00")] == 1.0
    assert "Times in Asia/Shanghai" in response.content.decode()


@pytest.mark.django_db
def test_a_price_tables_start_is_read_in_the_operators_zone(shanghai_operator, cluster):
    from billing.models import PriceTable

    form = shanghai_operator.get("/console/prices/").content.decode()
    assert "Effective from (YYYY-MM-DD HH:MM in Asia/Shanghai, future)" in form
    past = shanghai_operator.post("/console/prices/", {**PRICES, "effective_from": "2026-03-02 07:00"})
    assert past.status_code == 400 and "after 2026-03-02 07:30 CST" in past.content.decode()
    future = shanghai_operator.post("/console/prices/", {**PRICES, "effective_from": "2026-03-02 09:00"})
    assert future.status_code == 302
    assert PriceTable.objects.get(name="Spring").effective_from == datetime(2026, 3, 2, 1, 0, tzinfo=UTC)
