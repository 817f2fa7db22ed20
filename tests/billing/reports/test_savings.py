"""Savings per month: what the same held time costs on exclusive whole GPUs at list price, against what was
billed, from the ledger's own lines; for each workspace on /reports/ and for all of them on the console."""

from datetime import date
from decimal import Decimal

import pytest

from billing.ledger.services import add_adjustment
from billing.models import ChargeLine
from billing.reports.selectors import savings_by_period
from tests.billing.reports.tests_reports_helpers import make_usage


def _row(page: str, workspace: str) -> str:
    return page.split(f'data-workspace="{workspace}"', 1)[1].split("</tr>")[0]


@pytest.mark.django_db
def test_savings_are_the_exclusive_side_less_the_billed_side_of_the_same_lines(cluster):
    make_usage(cluster)
    lines = ChargeLine.objects.filter(workspace=cluster.vision)
    exclusive = sum(line.exclusive_cost for line in lines)
    billed = sum(line.cost for line in lines)
    [row] = savings_by_period(lines)
    assert (row["exclusive_cost"], row["cost"]) == (exclusive, billed)
    # half an A100 on a spot node, partly off-peak: far cheaper than a whole on-demand GPU
    assert row["saving"] == exclusive - billed > 0
    assert row["saving_percent"] == (row["saving"] * 100 / exclusive).quantize(Decimal("0.1"))


@pytest.mark.django_db
def test_an_adjustment_moves_the_bill_but_not_the_saving(cluster):
    make_usage(cluster)
    [before] = savings_by_period(ChargeLine.objects.filter(workspace=cluster.vision))
    line = ChargeLine.objects.filter(workspace=cluster.vision).first()
    add_adjustment(user=cluster.finance, workspace=cluster.vision, amount="-5.00", reason="goodwill credit",
                   period=line.period, now=line.charge_end)
    [after] = savings_by_period(ChargeLine.objects.filter(workspace=cluster.vision))
    assert after["cost"] == before["cost"] - Decimal("5.00")
    assert after["saving"] == before["saving"]


@pytest.mark.django_db
def test_each_tenant_sees_only_its_own_savings(client, cluster):
    make_usage(cluster)
    client.force_login(cluster.alice)
    page = client.get("/reports/?start=2026-03-01&end=2026-03-31").content.decode()
    vision = _row(page.split('id="savings"')[1], "vision-lab")
    [expected] = savings_by_period(ChargeLine.objects.filter(workspace=cluster.vision))
    assert f'data-field="saving">${expected["saving"]}' in vision
    assert 'data-workspace="nlp-group"' not in page.split('id="savings"')[1].split("</section>")[0]



@pytest.mark.django_db
def test_the_console_shows_every_workspaces_saving_of_the_last_months_and_tenants_cannot(client, cluster, clock):
    from datetime import UTC, datetime

    from django.contrib.auth import get_user_model
    from django.test import Client

    admin_client = Client()
    admin_client.force_login(get_user_model().objects.get(username="admin"))

    clock.now = datetime(2026, 4, 10, 12, tzinfo=UTC)
    make_usage(cluster)  # March
    [total] = savings_by_period(ChargeLine.objects.all(), per_workspace=False)
    assert total["saving"] == sum(r["saving"] for r in savings_by_period(ChargeLine.objects.all()))
    page = admin_client.get("/console/").content.decode()
    section = page.split('id="platform-savings"')[1].split("</section>")[0]
    assert f'data-field="saving">${total["saving"]}' in section and 'data-period="2026-03"' in section
    clock.now = datetime(2026, 7, 1, 12, tzinfo=UTC)  # March is no longer among the last three months
    later = admin_client.get("/console/").content.decode().split('id="platform-savings"')[1].split("</section>")[0]
    assert 'data-period="2026-03"' not in later
    client.force_login(cluster.alice)
    assert client.get("/console/").status_code == 403


@pytest.mark.django_db
def test_a_saving_says_which_days_of_its_month_it_covers(client, cluster):
    """Filtered to part of a month, the row is labelled with the days it sums, not with the whole month."""
    make_usage(cluster)
    client.force_login(cluster.alice)
    page = client.get("/reports/?workspace=vision-lab&start=2026-03-02&end=2026-03-09").content.decode()
    savings = page.split('id="savings"')[1].split("</section>")[0]
    days = _row(savings, "vision-lab").split('data-field="days">')[1].split("</td>")[0]
    assert days == "2026-03-02 to 2026-03-09"
    assert "2026-03-02 to 2026-03-09" in savings.split("</h2>")[0]
    [partial] = savings_by_period(ChargeLine.objects.filter(workspace=cluster.vision),
                                  within=(date(2026, 3, 2), date(2026, 3, 9)))
    assert (partial["first"], partial["last"], partial["whole_month"]) == (date(2026, 3, 2), date(2026, 3, 9), False)
    page = client.get("/reports/?workspace=vision-lab&start=2026-02-20&end=2026-04-10").content.decode()
    days = _row(page.split('id="savings"')[1], "vision-lab").split('data-field="days">')[1].split("</td>")[0]
    assert days == "2026-03"
