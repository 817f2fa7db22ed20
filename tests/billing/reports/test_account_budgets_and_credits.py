"""Billing accounts' monthly budgets (their workspaces' and sub-accounts' spend) and prepaid credit:
top-ups, the derived balance, the low-balance alert once per crossing, and the hard limit at zero."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.exceptions import PermissionDenied
from tests_reports_helpers import charge

from billing.accounts import AccountError, assign_workspace, save_account
from billing.credits import (
    check_credit_allows_submit,
    check_credits,
    credit_balance,
    top_up,
    workspace_credit,
)
from billing.models import AccountBudgetAlert, BillingAccount, CreditTopUp
from billing.reports.services import (
    BudgetError,
    account_budget_status,
    check_account_budgets,
    check_budget_allows_submit,
    check_budgets,
    set_account_budget,
)
from billing.services import BudgetBlocked, submit_quoted_job
from portal.models import Membership, Role
from scheduling.models import Job, JobState, Node, Replica

SPEC = "name: {name}\nroles:\n  - name: main\n    image: busybox\n    resources: {{gpu: 1}}\n    nodePool: h100\n"


def spend(user, workspace, amount, *, when=None):
    job = submit_quoted_job(user=user, workspace=workspace, spec=SPEC.format(name="spend"))
    return charge(job, amount, when=when)


@pytest.fixture
def lab(cluster):
    """ai-lab (USD) pays for vision-lab; its sub-account nlp-team pays for nlp-group."""
    dept = save_account(slug="ai-lab", name="AI Lab", currency="USD")
    team = save_account(slug="nlp-team", name="NLP team", currency="USD", parent=dept)
    assign_workspace(cluster.vision, dept)
    assign_workspace(cluster.nlp, team)
    return dept, team


# --------------------------------------------------------------------------- account budgets


def test_an_account_budget_sums_its_workspaces_and_its_sub_accounts(cluster, lab):
    dept, team = lab
    set_account_budget(user=cluster.admin, account=dept, amount="100")
    set_account_budget(user=cluster.admin, account=team, amount="1000")
    spend(cluster.alice, cluster.vision, "30")
    spend(cluster.bob, cluster.nlp, "25")
    assert account_budget_status(dept).spent == Decimal("55.00")
    assert account_budget_status(team).spent == Decimal("25.00")
    check_budgets()
    assert [a.threshold for a in AccountBudgetAlert.objects.filter(budget__account=dept)] == [50]
    assert not AccountBudgetAlert.objects.filter(budget__account=team).exists()
    told = {address for message in mail.outbox for address in message.to}
    assert {"alice@example.com", "bob@example.com", "finance@example.com"} <= told
    assert sum("finance@example.com" in m.to for m in mail.outbox) == 1  # in both workspaces, told once
    assert check_account_budgets() == []  # once per threshold and month


def test_an_account_budget_blocks_every_workspace_it_pays_for(cluster, lab):
    dept, _ = lab
    set_account_budget(user=cluster.admin, account=dept, amount="50", block_at_limit=True)
    spend(cluster.bob, cluster.nlp, "50")  # the sub-account's workspace spends the department's budget
    for workspace in (cluster.vision, cluster.nlp):
        assert "Billing account ai-lab has spent $50.00 of its $50.00 budget" in check_budget_allows_submit(workspace)
    with pytest.raises(BudgetBlocked):
        submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC.format(name="refused"))
    set_account_budget(user=cluster.admin, account=dept, amount="60", block_at_limit=True)
    assert check_budget_allows_submit(cluster.vision) is None


def test_account_budget_input_is_checked(cluster, lab):
    dept, _ = lab
    for bad in ("0", "-5", "abc", "1.001"):
        with pytest.raises(BudgetError):
            set_account_budget(user=cluster.admin, account=dept, amount=bad)
    with pytest.raises(PermissionDenied):  # an owner, not finance
        set_account_budget(user=cluster.alice, account=dept, amount="10")
    assert account_budget_status(dept) is None


# --------------------------------------------------------------------------- prepaid credit


@pytest.fixture
def prepaid(cluster, clock):
    account = save_account(slug="vision-co", name="Vision Co", currency="USD", prepaid=True, low_balance="20")
    assign_workspace(cluster.vision, account)
    return account


def test_top_ups_are_positive_and_finance_only(cluster, prepaid):
    for bad in ("0", "-10", "abc", "0.001", "NaN"):
        with pytest.raises(AccountError) as refused:
            top_up(cluster.finance, prepaid, bad)
        assert refused.value.errors.keys() == {"amount"}
    outsider = get_user_model().objects.create_user("nlp-finance", "nlp-finance@example.com")
    Membership.objects.create(user=outsider, workspace=cluster.nlp, role=Role.FINANCE)
    for user in (cluster.bob, outsider, cluster.alice):  # another tenant; an owner who is not finance
        with pytest.raises(PermissionDenied):
            top_up(user, prepaid, "100")
    assert not CreditTopUp.objects.exists() and credit_balance(prepaid).balance == 0
    top_up(cluster.finance, prepaid, "100.50", "PO 7")
    assert credit_balance(BillingAccount.objects.get(pk=prepaid.pk)).balance == Decimal("100.50")


def test_the_balance_is_top_ups_minus_lines_since_the_first_top_up(cluster, prepaid, clock):
    hour = clock.now.replace(minute=0, second=0, microsecond=0)
    top_up(cluster.finance, prepaid, "100")
    prepaid.refresh_from_db()
    assert prepaid.credit_started == hour
    spend(cluster.alice, cluster.vision, "7.00", when=hour - timedelta(hours=1))  # before the credit: not debited
    spend(cluster.alice, cluster.vision, "30.25", when=hour)
    spend(cluster.bob, cluster.nlp, "99", when=hour)  # another account's workspace
    balance = credit_balance(prepaid)
    assert (balance.topped_up, balance.debited, balance.balance) == (Decimal("100.00"), Decimal("30.25"),
                                                                     Decimal("69.75"))
    assert workspace_credit(cluster.vision).balance == Decimal("69.75") and workspace_credit(cluster.nlp) is None


def test_low_balance_alerts_once_per_crossing(cluster, prepaid, clock):
    top_up(cluster.finance, prepaid, "100")
    spend(cluster.alice, cluster.vision, "70", when=clock.now)
    assert check_credits() == [] and not mail.outbox  # 30 left: above the mark of 20
    spend(cluster.alice, cluster.vision, "15", when=clock.now)
    assert check_credits() == [prepaid]
    (message,) = mail.outbox
    assert "prepaid credit is low ($15.00 left)" in message.subject
    assert set(message.to) == {"alice@example.com", "finance@example.com"}  # owners and finance
    spend(cluster.alice, cluster.vision, "5", when=clock.now)
    assert check_credits() == [] and len(mail.outbox) == 1  # still low: not again
    top_up(cluster.finance, prepaid, "50")  # 60 left: above the mark, the alert is armed again
    assert check_credits() == [] and len(mail.outbox) == 1
    spend(cluster.alice, cluster.vision, "45", when=clock.now)
    assert check_credits() == [prepaid] and len(mail.outbox) == 2


def test_at_zero_new_submissions_are_refused(cluster, prepaid, clock):
    assert "has $0.00 left" in check_credit_allows_submit(cluster.vision)  # prepaid, never topped up
    top_up(cluster.finance, prepaid, "10")
    assert check_budget_allows_submit(cluster.vision) is None
    spend(cluster.alice, cluster.vision, "10", when=clock.now)
    reason = check_budget_allows_submit(cluster.vision)
    assert "Billing account vision-co runs on prepaid credit and has $0.00 left" in reason
    with pytest.raises(BudgetBlocked) as refused:
        submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC.format(name="refused"))
    assert refused.value.status == 403
    assert check_budget_allows_submit(cluster.nlp) is None  # another account's workspace goes on
    top_up(cluster.finance, prepaid, "5")
    assert check_budget_allows_submit(cluster.vision) is None


def test_at_zero_preemptible_jobs_are_suspended_if_the_account_says_so(cluster, prepaid, clock):
    save_account(prepaid, suspend_preemptible_at_zero=True)
    top_up(cluster.finance, prepaid, "10")
    spot = submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                             spec=SPEC.format(name="spot") + "preemptible: true\nqueue: community\n")
    Replica.objects.create(job=spot, role="main", index=0, state=JobState.RUNNING, node=Node.objects.get(name="h100-02"),
                           gpu_indices=[0], slice={"kind": "whole", "gpu_milli": 1000}, started=clock.now)
    spot.state, spot.started = JobState.RUNNING, clock.now
    spot.save(update_fields=["state", "started"])
    spend(cluster.alice, cluster.vision, "10", when=clock.now)
    check_credits()
    assert Job.objects.get(pk=spot.pk).pending_code == "budget_suspended"
    top_up(cluster.finance, prepaid, "20")  # credit again: it goes back to its queue
    assert Job.objects.get(pk=spot.pk).pending_code == "waiting_for_cycle"


def test_prepaid_credit_is_in_the_accounts_currency(cluster, prepaid):
    cny = save_account(slug="cny-co", name="CNY Co", currency="CNY", prepaid=True)
    with pytest.raises(AccountError) as refused:
        assign_workspace(cluster.nlp, cny)  # billed in USD
    assert refused.value.errors.keys() == {"account"}
    with pytest.raises(AccountError) as refused:
        save_account(prepaid, currency="CNY")  # vision-lab is billed in USD
    assert refused.value.errors.keys() == {"currency"}
