"""Budgets: alerts fire once per threshold (50, 80 and 100 % by default) and period, by email and on
the page, stating the real percentage spent; blocking at 100 %; the monthly statement."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core import mail
from django.core.exceptions import PermissionDenied
from django.test import Client
from tests_reports_helpers import charge

from billing.models import BudgetAlert
from billing.reports.services import (
    budget_status,
    check_budget_allows_submit,
    check_budgets,
    period_start,
    set_budget,
)
from billing.services import submit_quoted_job

pytestmark = pytest.mark.usefixtures("clock")  # budgets count the platform clock's month


def spend(tenants, amount, *, when=None):
    """A ledger line of `amount` in the workspace's current month (its first hour)."""
    job = submit_quoted_job(user=tenants.alice, workspace=tenants.vision,
                            spec="name: spend\nroles:\n  - name: main\n    image: busybox\n"
                                 "    resources: {gpu: 1}\n    nodePool: h100\n")
    charge(job, amount, when=when)


def test_each_threshold_fires_once_per_period(cluster, clock):
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="100")
    assert budget_status(cluster.vision).budget.thresholds == "50,80,100"
    spend(cluster, "40")
    assert check_budgets() == [] and len(mail.outbox) == 0
    spend(cluster, "10")  # exactly 50 %
    assert [a.threshold for a in check_budgets()] == [50] and len(mail.outbox) == 1
    assert "50.0 % of the monthly budget" in mail.outbox[0].subject
    spend(cluster, "35")
    fired = check_budgets()
    assert [a.threshold for a in fired] == [80] and len(mail.outbox) == 2
    subject, body = mail.outbox[1].subject, mail.outbox[1].body
    assert "85.0 % of the monthly budget spent (alert at 80 %)" in subject
    assert "spent $85.00 of its $100.00 budget" in body and "85.0 %" in body
    assert set(mail.outbox[1].to) == {"alice@example.com", "finance@example.com"}
    assert fired[0].percent == Decimal("85.0") and fired[0].spent == Decimal("85.00")
    assert check_budgets() == [] and len(mail.outbox) == 2  # not again
    spend(cluster, "20")
    assert [a.threshold for a in check_budgets()] == [100] and len(mail.outbox) == 3
    assert "105.0 %" in mail.outbox[2].subject
    assert check_budgets() == [] and BudgetAlert.objects.count() == 3
    next_month = (clock.now.replace(day=28) + timedelta(days=5))
    assert check_budgets(now=next_month) == []  # a new period starts from zero


def test_an_alert_far_above_its_threshold_states_the_real_percentage(cluster):
    """46.00 spent of a 10.00 budget is 460.0 %: the alert at 80 % says so (the old bug: its e-mail
    said "80 %" while 460 % was spent)."""
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="10", thresholds="80")
    spend(cluster, "46")
    (alert,) = check_budgets()
    assert (alert.threshold, alert.percent, alert.spent) == (80, Decimal("460.0"), Decimal("46.00"))
    (message,) = mail.outbox
    assert "460.0 % of the monthly budget spent (alert at 80 %)" in message.subject
    assert "spent $46.00 of its $10.00 budget" in message.body and message.body.rstrip().endswith("460.0 %.")


def test_thresholds_crossed_at_once_fire_together_with_one_email(cluster):
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="10")
    spend(cluster, "46")
    fired = check_budgets()
    assert [a.threshold for a in fired] == [50, 80, 100]
    assert {a.percent for a in fired} == {Decimal("460.0")}  # each records the real percentage
    (message,) = mail.outbox  # one e-mail, about the highest threshold crossed
    assert "460.0 % of the monthly budget spent (alert at 100 %)" in message.subject
    assert check_budgets() == [] and len(mail.outbox) == 1


def test_alerts_show_in_the_portal(cluster, clock):
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="10")
    spend(cluster, "12")
    check_budgets()
    client = Client()
    client.force_login(cluster.finance)
    body = client.get("/reports/").content.decode()
    for threshold in (50, 80, 100):  # 12 of 10 spent: each alert says 120.0 %
        assert f"120.0 % of the budget spent ($12.00, alert at {threshold} %)" in body
    status = budget_status(cluster.vision)
    assert status.percent == Decimal("120.0") and status.period_start == period_start(clock.now)


def test_the_owner_may_block_submissions_at_the_limit(cluster):
    assert check_budget_allows_submit(cluster.vision) is None  # no budget
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="10")
    spend(cluster, "10")
    assert check_budget_allows_submit(cluster.vision) is None  # over, but not blocking
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="10", block_at_limit=True)
    reason = check_budget_allows_submit(cluster.vision)
    assert "vision-lab" in reason and "$10.00 of its $10.00 budget" in reason
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


def test_monthly_statement_by_model_and_sharing_with_exclusive_comparison(usage):
    """vision-lab in March: vision-train 1.82 + 3.04 + 3.04 = 7.90 on H100s (exclusive 3 x 3.04 = 9.12),
    the notebook 2 x 0.42 + 2 x 0.25 = 1.34 on half an A100 (a whole one at peak: 4 x 1.96 = 7.84).
    Billed 9.24 of 16.96: sharing and discounts saved 7.72."""
    client = Client()
    client.force_login(usage.tenants.finance)
    response = client.get("/reports/statements/vision-lab/2026-03/")
    assert response.status_code == 200
    stmt = response.context["stmt"]
    lines = {(line["gpu_model"], line["sharing"]): line for line in stmt.lines}
    assert set(lines) == {("H100-80GB", "exclusive"), ("A100-80GB", "fraction")}
    assert lines[("A100-80GB", "fraction")]["allocated_gpu_hours"] == 2  # 22:00-02:00 at half a GPU
    assert lines[("A100-80GB", "fraction")]["cost"] == Decimal("1.34")
    assert lines[("H100-80GB", "exclusive")]["cost"] == Decimal("7.90")
    assert stmt.total == sum(line["cost"] for line in stmt.lines) == Decimal("9.24")
    assert (stmt.opening, stmt.closing, stmt.adjustments) == (0, Decimal("9.24"), [])
    assert stmt.usage.exclusive_cost == Decimal("16.96") and stmt.saved == Decimal("7.72")
    page = response.content.decode()
    assert "9.24" in page and "16.96" in page and "7.72" in page and "nlp-finetune" not in page
    printed = client.get("/reports/statements/vision-lab/2026-03/?print=1").content.decode()
    assert "mainnav" not in printed and "Exclusive on-demand" in printed and "16.96" in printed
    assert client.get("/reports/statements/vision-lab/March/").status_code == 400
