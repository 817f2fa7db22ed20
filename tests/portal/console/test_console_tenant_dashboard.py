"""The tenant dashboard: this month's figures for the current workspace only, the same as the report's."""

from datetime import datetime, time, timedelta
from decimal import Decimal

import pytest


def usage(job, day, *, alloc, used, cost, exclusive):
    """A closed ledger line of the job at noon of `day`."""
    from billing.models import ChargeLine
    from billing.time_zone import platform_tz

    hour = datetime.combine(day, time(12), tzinfo=platform_tz())
    return ChargeLine.objects.create(
        hour=hour, day=day, period=day.replace(day=1), charge_start=hour, charge_end=hour + timedelta(hours=1),
        workspace=job.workspace, queue=job.queue.name, job=job, job_name=job.name, node="h100-01",
        gpu_model="H100-80GB", sharing="exclusive", allocated_gpu_hours=Decimal(alloc), used_gpu_hours=Decimal(used),
        idle_gpu_hours=Decimal(alloc) - Decimal(used), cost=Decimal(cost), list_cost=Decimal(exclusive),
        exclusive_cost=Decimal(exclusive), currency="USD", provisional=False, computed_at=hour)


@pytest.fixture
def month_of_usage(cluster, submit, clock):  # "this month" is the platform clock's
    from billing.time_zone import platform_tz

    today = clock.now.astimezone(platform_tz()).date()
    v1, v2 = submit(cluster, "vision-a"), submit(cluster, "vision-b")
    n1 = submit(cluster, "nlp-secret", workspace="nlp", queue="nlp-group")
    usage(v1, today, alloc="3.5", used="1.5", cost="10.25", exclusive="14.00")
    usage(v2, today.replace(day=1), alloc="2", used="1.9", cost="4.75", exclusive="4.75")
    usage(v1, today.replace(day=1) - timedelta(days=1), alloc="50", used="0", cost="123.00", exclusive="123.00")
    usage(n1, today, alloc="777", used="1", cost="999.99", exclusive="1500")
    return v1, v2, n1


@pytest.mark.django_db
def test_alice_sees_only_vision_lab_this_month(client, cluster, month_of_usage):
    v1, v2, n1 = month_of_usage
    client.force_login(cluster.alice)
    response = client.get("/")
    data = response.context["data"]
    assert data.totals.allocated_gpu_hours == Decimal("5.5") and data.totals.cost == Decimal("15.00")
    assert data.efficiency == Decimal("61.8")          # 3.4 / 5.5
    assert data.savings == Decimal("3.75")             # 18.75 on whole GPUs at peak - 15.00
    assert [w["job_id"] for w in data.wasters] == [v1.pk, v2.pk]  # 2.0 idle, then 0.1
    assert {s["state"]: s["n"] for s in data.jobs_by_state} == {"Pending": 2}
    page = response.content.decode()
    assert "15.00" in page and "5.50" in page
    assert "999" not in page and "nlp-secret" not in page and "777" not in page and "123.00" not in page


@pytest.mark.django_db
def test_bob_sees_only_nlp_group(client, cluster, month_of_usage):
    client.force_login(cluster.bob)
    data = client.get("/").context["data"]
    assert data.totals.cost == Decimal("999.99") and data.totals.allocated_gpu_hours == Decimal("777")
    assert {s["state"]: s["n"] for s in data.jobs_by_state} == {"Pending": 1}


@pytest.mark.django_db
def test_dashboard_totals_are_the_reports_totals(client, cluster, month_of_usage):
    client.force_login(cluster.alice)
    dashboard = client.get("/")
    report = client.get(f"/reports/?{dashboard.context['report_query']}")
    total = report.context["totals"][0]
    mine = dashboard.context["data"].totals
    assert mine.cost == Decimal("15.00") and mine.rows == 2  # this month's two vision-lab lines
    for field in ("cost", "allocated_gpu_hours", "used_gpu_hours", "exclusive_cost", "idle_gpu_hours"):
        assert getattr(total, field) == getattr(mine, field)


@pytest.mark.django_db
def test_budget_shows_spend_against_it(client, cluster, month_of_usage):
    from billing.models import Budget

    Budget.objects.create(workspace=cluster.vision, amount=Decimal("200"), currency="USD")
    client.force_login(cluster.alice)
    response = client.get("/")
    status = response.context["data"].budget
    assert status.budget.amount == Decimal("200") and status.spent == Decimal("15.00")  # not last month's 123
    assert status.percent == Decimal("7.5")
    assert '<span data-field="budget-percent">7.5</span>' in response.content.decode()


@pytest.mark.django_db
def test_a_user_without_workspace_gets_the_plain_page(client, db):
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.create_user("loner", password="x"))
    response = client.get("/")
    assert response.status_code == 200 and "not a member of any workspace" in response.content.decode()
