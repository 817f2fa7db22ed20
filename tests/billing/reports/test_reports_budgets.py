"""Budgets: alerts fire once per threshold and period, by email and on the page; blocking at 100 %."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core import mail
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.utils import timezone

from billing.models import BudgetAlert, UsageHour
from billing.reports.services import (
    budget_status,
    check_budget_allows_submit,
    check_budgets,
    period_start,
    set_budget,
)
from billing.services import submit_quoted_job


def spend(tenants, amount, *, when=None):
    """A cost landing in the workspace's current month (its first hour)."""
    job = submit_quoted_job(user=tenants.alice, workspace=tenants.vision,
                            spec="name: spend\nroles:\n  - name: main\n    image: busybox\n"
                                 "    resources: {gpu: 1}\n    nodePool: h100\n")
    start = when or timezone.now().replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    UsageHour.objects.create(hour=start, job=job, workspace=tenants.vision, queue=job.queue.name,
                             gpu_model="H100-80GB", sharing="whole", cost=Decimal(amount))


def test_each_threshold_fires_once_per_period(cluster):
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="100")
    spend(cluster, "50")
    assert check_budgets() == [] and len(mail.outbox) == 0
    spend(cluster, "35")
    fired = check_budgets()
    assert [a.threshold for a in fired] == [80] and len(mail.outbox) == 1
    assert "80 %" in mail.outbox[0].subject and set(mail.outbox[0].to) == {"alice@example.com", "finance@example.com"}
    assert check_budgets() == [] and len(mail.outbox) == 1  # not again
    spend(cluster, "20")
    assert [a.threshold for a in check_budgets()] == [100] and len(mail.outbox) == 2
    assert check_budgets() == [] and BudgetAlert.objects.count() == 2
    next_month = (timezone.now().replace(day=28) + timedelta(days=5))
    assert check_budgets(now=next_month) == []  # a new period starts from zero


def test_alerts_show_in_the_portal(cluster):
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="10")
    spend(cluster, "12")
    check_budgets()
    client = Client()
    client.force_login(cluster.finance)
    body = client.get("/reports/").content.decode()
    assert "100 % of the budget reached" in body and "80 % of the budget reached" in body
    status = budget_status(cluster.vision)
    assert status.percent == Decimal("120.0") and status.period_start == period_start(timezone.now())


def test_the_owner_may_block_submissions_at_the_limit(cluster):
    assert check_budget_allows_submit(cluster.vision) is None  # no budget
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="10")
    spend(cluster, "10")
    assert check_budget_allows_submit(cluster.vision) is None  # over, but not blocking
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="10", block_at_limit=True)
    reason = check_budget_allows_submit(cluster.vision)
    assert "vision-lab" in reason and "10.00 USD of its 10.00 USD budget" in reason
    assert check_budget_allows_submit(cluster.nlp) is None
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="20", block_at_limit=True)
    assert check_budget_allows_submit(cluster.vision) is None


def test_who_may_set_a_budget(cluster):
    with pytest.raises(PermissionDenied):
        set_budget(user=cluster.carol, workspace=cluster.vision, amount="10")  # a member
    with pytest.raises(PermissionDenied):
        set_budget(user=cluster.bob, workspace=cluster.vision, amount="10")  # an outsider
    set_budget(user=cluster.finance, workspace=cluster.vision, amount="10")
    with pytest.raises(PermissionDenied, match="Only an owner"):
        set_budget(user=cluster.finance, workspace=cluster.vision, amount="10", block_at_limit=True)
    with pytest.raises(ValueError, match="positive"):
        set_budget(user=cluster.alice, workspace=cluster.vision, amount="-5")
    with pytest.raises(ValueError, match="not a number"):
        set_budget(user=cluster.alice, workspace=cluster.vision, amount="lots")


def test_budget_form_on_the_page(cluster):
    client = Client()
    client.force_login(cluster.alice)
    client.post("/reports/budgets/vision-lab/", {"amount": "250", "currency": "USD", "block_at_limit": "on"})
    status = budget_status(cluster.vision)
    assert status.budget.amount == Decimal("250") and status.budget.block_at_limit
    assert client.post("/reports/budgets/nlp-group/", {"amount": "1"}).status_code == 404


def test_monthly_statement_by_model_and_sharing_with_on_demand_comparison(usage):
    client = Client()
    client.force_login(usage.tenants.finance)
    response = client.get("/reports/statements/vision-lab/2026-03/")
    assert response.status_code == 200
    stmt = response.context["stmt"]
    lines = {(line["gpu_model"], line["sharing"]): line for line in stmt.lines}
    assert set(lines) == {("H100-80GB", "exclusive"), ("A100-80GB", "fraction")}
    assert lines[("A100-80GB", "fraction")]["allocated_gpu_hours"] == 2  # 22:00-02:00 at half a GPU
    total = stmt.totals[0]
    assert total.cost == sum(line["cost"] for line in stmt.lines)
    assert total.on_demand_cost > total.cost and stmt.savings[0]["saved"] == total.on_demand_cost - total.cost
    printed = client.get("/reports/statements/vision-lab/2026-03/?print=1").content.decode()
    assert "mainnav" not in printed and "Exclusive on-demand" in printed
    assert client.get("/reports/statements/vision-lab/March/").status_code == 400
