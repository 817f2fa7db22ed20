"""The console's writes to billing accounts: each calls billing's service (which checks and refuses
with field errors, nothing changed) and records who changed what in the audit log, both or neither."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from billing.api import accounts, credits, report_services
from billing.models import AccountBudget, BillingAccount, CreditTopUp
from portal import history_catalogue as texts
from portal.console import audit
from portal.models import Workspace
from scheduling.api import said

AUDITED_FIELDS = accounts.ACCOUNT_FIELDS
BUDGET_FIELDS = ("amount", "block_at_limit", "suspend_preemptible", "thresholds")


@transaction.atomic
def save_account(user, account: BillingAccount | None, fields: Mapping[str, Any]) -> BillingAccount:
    """Create (account None) or change an account; AccountError names the refused field."""
    before = audit.snapshot(account, AUDITED_FIELDS) if account else {}
    created = account is None
    saved = accounts.save_account(account, **fields)
    changes = audit.diff(before, audit.snapshot(saved, AUDITED_FIELDS))
    if changes or created:
        audit.record(user, "create" if created else "change", saved, changes=changes)
    return saved


@transaction.atomic
def assign_workspace(user, workspace: Workspace, account: BillingAccount | None) -> None:
    before = accounts.account_of(workspace)
    if before == account:
        return
    accounts.assign_workspace(workspace, account)
    audit.record(user, "set account", workspace,
                 changes={"billing_account": [before.slug if before else None, account.slug if account else None]},
                 message=said(texts.WORKSPACE_ACCOUNT_SET, workspace=workspace.slug,
                              account=account.slug if account else said(texts.NONE),
                              before=before.slug if before else said(texts.NONE)))


@transaction.atomic
def set_budget(user, account: BillingAccount, *, amount, block_at_limit: bool, suspend_preemptible: bool,
               thresholds: str | None) -> AccountBudget:
    current = AccountBudget.objects.filter(account=account).first()
    before = audit.snapshot(current, BUDGET_FIELDS) if current else {}
    budget = report_services.set_account_budget(user=user, account=account, amount=amount,
                                                block_at_limit=block_at_limit,
                                                suspend_preemptible=suspend_preemptible, thresholds=thresholds)
    budget.refresh_from_db()
    audit.record(user, "set budget", account, changes=audit.diff(before, audit.snapshot(budget, BUDGET_FIELDS)))
    return budget


@transaction.atomic
def remove_budget(user, account: BillingAccount) -> None:
    current = AccountBudget.objects.filter(account=account).first()
    if current is None:
        return
    before = audit.snapshot(current, BUDGET_FIELDS)
    report_services.remove_account_budget(user=user, account=account)
    audit.record(user, "remove budget", account, changes={k: [v, None] for k, v in before.items()})


@transaction.atomic
def top_up(user, account: BillingAccount, amount, note: str = "") -> CreditTopUp:
    before = credits.credit_balance(account).balance
    topped = credits.top_up(user, account, amount, note)
    after = credits.credit_balance(BillingAccount.objects.get(pk=account.pk)).balance
    audit.record(user, "top up", account, changes={"credit_balance": [before, after]},
                 message=said(texts.ACCOUNT_TOPPED_UP, account=account.slug, amount=topped.amount,
                              currency=topped.currency, note=topped.note or "–"))
    return topped
