"""Prepaid credit: an account with `prepaid` runs on credit that finance tops up.

The balance is derived, never stored: the top-ups minus the sum of the ledger lines its workspaces were
billed since the credit started (the hour of the first top-up). Lines are already rounded when written,
so the balance is a sum of rounded figures and billed history is never touched. A workspace's lines debit
the nearest prepaid account: its own, else the one its sub-account belongs to.

At or below the account's low-balance mark its workspaces' owners and finance are told once per crossing
(a top-up above the mark arms the alert again). At zero the budgets' hard limit applies: new submissions
are refused and, when the account says so, preemptible jobs are suspended until a top-up.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q, Sum
from django.utils.translation import gettext

from billing import history_catalogue as texts
from billing import pricing
from billing.accounts import AccountError, account_workspace_ids, paying_for
from billing.ledger.periods import period_bounds, period_start
from billing.models import AccountWorkspace, BillingAccount, ChargeLine, CreditTopUp
from billing.notices import Notice, budget_recipients, raise_notice, written_in_english
from scheduling.api import clock, formats, release_suspended, said, suspend_jobs
from scheduling.models import FINAL_STATES, Job

log = logging.getLogger(__name__)
MAX_TOP_UP = Decimal("1e12")  # CreditTopUp.amount holds 14 digits, 2 after the point
MAX_NOTE = 200


@dataclass(frozen=True)
class CreditBalance:
    account: BillingAccount
    topped_up: Decimal
    debited: Decimal
    started: datetime | None

    @property
    def balance(self) -> Decimal:
        return self.topped_up - self.debited

    @property
    def exhausted(self) -> bool:
        return self.balance <= 0

    @property
    def low(self) -> bool:
        mark = self.account.low_balance
        return mark is not None and self.balance <= mark


def debited_workspace_ids(account: BillingAccount) -> list[int]:
    """The workspaces whose lines debit a prepaid account: its own, and its sub-accounts' where the
    sub-account holds no credit of its own."""
    return sorted(_debited_workspaces({account.pk})[account.pk])


def _debited_workspaces(ids: set[int]) -> dict[int, set[int]]:
    """debited_workspace_ids of each account in `ids`, from one query."""
    debited: dict[int, set[int]] = {pk: set() for pk in ids}
    links = AccountWorkspace.objects.filter(Q(account_id__in=ids) | Q(account__parent_id__in=ids, account__prepaid=False))
    for account_id, parent_id, prepaid, workspace_id in links.values_list(
            "account_id", "account__parent_id", "account__prepaid", "workspace_id"):
        if account_id in ids:
            debited[account_id].add(workspace_id)
        if parent_id in ids and not prepaid:
            debited[parent_id].add(workspace_id)
    return debited


def credit_holder(workspace) -> BillingAccount | None:
    """The prepaid account the workspace's lines debit, or None (its bills are invoiced)."""
    link = AccountWorkspace.objects.select_related("account__parent").filter(workspace=workspace).first()
    if link is None:
        return None
    account = link.account
    if account.prepaid:
        return account
    return account.parent if account.parent is not None and account.parent.prepaid else None


def _debits(account: BillingAccount, workspace_ids) -> Q:
    return Q(workspace_id__in=workspace_ids, hour__gte=account.credit_started, currency=account.currency)


def debit_lines(account: BillingAccount):
    """The ledger lines that debit the account's credit (none before it started)."""
    if account.credit_started is None:
        return ChargeLine.objects.none()
    return ChargeLine.objects.filter(_debits(account, debited_workspace_ids(account)))


def credit_balance(account: BillingAccount) -> CreditBalance:
    return credit_balances([account])[account.pk]


def credit_balances(accounts) -> dict[int, CreditBalance]:
    """Each account's CreditBalance by id, from one query each for the top-ups, the workspaces and the
    debits of all of them (a page listing accounts)."""
    accounts = list(accounts)
    ids = {a.pk for a in accounts}
    topped = {(account_id, currency): total for account_id, currency, total in CreditTopUp.objects.filter(
        account_id__in=ids).order_by().values_list("account_id", "currency").annotate(total=Sum("amount"))}
    debited = _debited_workspaces(ids)
    debiting = {f"a{a.pk}": Sum("cost", filter=_debits(a, debited[a.pk]))
                for a in accounts if a.credit_started is not None and debited[a.pk]}
    sums = ChargeLine.objects.filter(workspace_id__in=set().union(*debited.values())).aggregate(**debiting) if debiting else {}
    return {a.pk: CreditBalance(
        account=a, topped_up=pricing.quantize_money(topped.get((a.pk, a.currency), Decimal(0)), a.currency),
        debited=pricing.quantize_money(sums.get(f"a{a.pk}") or Decimal(0), a.currency), started=a.credit_started)
        for a in accounts}


def workspace_credit(workspace) -> CreditBalance | None:
    """The credit the workspace draws on, for its own pages (None: its bills are invoiced)."""
    account = credit_holder(workspace)
    return credit_balance(account) if account is not None else None


def visible_accounts(user):
    """The accounts whose figures `user` may read: all for staff, else those paying for a workspace where
    the user is finance (directly or through a sub-account)."""
    accounts = BillingAccount.objects.select_related("parent").order_by("slug")
    if getattr(user, "is_staff", False):
        return accounts
    if not user.is_authenticated:
        return accounts.none()
    mine = Q(workspace_links__workspace__memberships__user=user, workspace_links__workspace__memberships__role="finance")
    below = Q(sub_accounts__workspace_links__workspace__memberships__user=user,
              sub_accounts__workspace_links__workspace__memberships__role="finance")
    return accounts.filter(pk__in=BillingAccount.objects.filter(mine | below).values("pk"))


def require_account_finance(user, account: BillingAccount) -> None:
    """An account's credit and budget are finance's: staff, or a finance member of a workspace it pays for."""
    if getattr(user, "is_staff", False):
        return
    ids = account_workspace_ids(account)
    if not (user.is_authenticated and user.memberships.filter(workspace_id__in=ids, role="finance").exists()):
        raise PermissionDenied(gettext("Only finance may change a billing account's credit or budget."))


def check_top_up_amount(raw, currency: str) -> Decimal:
    try:
        amount = Decimal(str(raw).strip())
    except ArithmeticError:
        raise AccountError(gettext("amount: %(amount)s is not a number") % {"amount": repr(str(raw)[:40])},
                           field="amount") from None
    if not amount.is_finite() or amount <= 0:
        raise AccountError(gettext("amount: a top-up is more than 0"), field="amount")
    if amount >= MAX_TOP_UP:
        raise AccountError(gettext("amount: a top-up is below %(most)s") % {"most": f"{MAX_TOP_UP:,.0f}"},
                           field="amount")
    if amount != pricing.quantize_money(amount, currency):
        raise AccountError(gettext("amount: %(currency)s amounts have at most %(places)s decimal places") % {
            "currency": currency, "places": pricing.minor_unit(currency)}, field="amount")
    return amount


@transaction.atomic
def top_up(user, account: BillingAccount, amount, note: str = "") -> CreditTopUp:
    """Add credit to a prepaid account (finance only); its first top-up starts the debits. A top-up that
    lifts the balance above the low-balance mark arms the alert again; above zero, suspended jobs go on."""
    account = BillingAccount.objects.select_for_update().get(pk=account.pk)
    require_account_finance(user, account)
    if not account.prepaid:
        raise AccountError(gettext("account: %(account)s is invoiced, not prepaid") % {"account": account.slug},
                           field="account")
    amount = check_top_up_amount(amount, account.currency)
    if len(note) > MAX_NOTE:
        raise AccountError(gettext("note: at most %(most)s characters") % {"most": MAX_NOTE}, field="note")
    now = clock.now()
    if account.credit_started is None:  # the hour of the first top-up: its lines are the first debits
        account.credit_started = now.replace(minute=0, second=0, microsecond=0)
        account.save(update_fields=["credit_started"])
    topped = CreditTopUp.objects.create(account=account, amount=amount, currency=account.currency, at=now,
                                        author=user if getattr(user, "pk", None) else None, note=note.strip())
    balance = credit_balance(account)
    if account.low_balance_alerted and not balance.low:
        BillingAccount.objects.filter(pk=account.pk).update(low_balance_alerted=False)
    if not balance.exhausted:
        for workspace_id in debited_workspace_ids(account):
            release_suspended(AccountWorkspace.workspace.field.related_model(pk=workspace_id))
    return topped


def check_credit_allows_submit(workspace) -> str | None:
    """Why a new submission must be refused (its prepaid account has no credit left), or None."""
    account = credit_holder(workspace)
    if account is None:
        return None
    balance = credit_balance(account)
    if not balance.exhausted:
        return None
    return (f"Billing account {account.slug} runs on prepaid credit and has "
            f"{formats.money(balance.balance, account.currency, 'en')} left; new submissions in {workspace.slug} are "
            "refused until finance tops it up.")


def check_credits(*, now: datetime | None = None, workspace_ids=None) -> list[BillingAccount]:
    """Tell each prepaid account's people once when its balance falls to its low-balance mark; at zero,
    suspend preemptible jobs where the account says so. Returns the accounts alerted now."""
    now = now or clock.now()
    accounts = BillingAccount.objects.filter(prepaid=True, credit_started__isnull=False).order_by("pk")
    if workspace_ids is not None:
        accounts = accounts.filter(paying_for(list(workspace_ids))).distinct()
    alerted = []
    for account in accounts:
        try:
            if _check_credit(account, now):
                alerted.append(account)
        except Exception:  # one bad account must not stop the others' alerts
            log.exception("credit check of account %s failed", account.slug)
    return alerted


def _check_credit(account: BillingAccount, now: datetime) -> bool:
    balance = credit_balance(account)
    fired = False
    # The flag flips in one UPDATE: two checks at once alert once.
    if balance.low and BillingAccount.objects.filter(pk=account.pk, low_balance_alerted=False).update(
            low_balance_alerted=True):
        _send_low_balance(account, balance)
        fired = True
    if balance.exhausted and account.suspend_preemptible_at_zero:
        jobs = list(Job.objects.filter(workspace_id__in=debited_workspace_ids(account), preemptible=True)
                    .exclude(state__in=FINAL_STATES).exclude(pending_code="budget_suspended"))
        if jobs:
            _, until = period_bounds(period_start(now))
            suspend_jobs(jobs, until=until, reason=said(texts.CREDIT_SPENT, account=account.slug))
            log.info("credit of %s spent: suspended preemptible jobs %s", account.slug, [j.pk for j in jobs])
    return fired


def _low_balance_texts(account: BillingAccount, balance: CreditBalance) -> tuple[str, str]:
    figures = {"account": account.name, "slug": account.slug,
               "balance": formats.money(balance.balance, account.currency),
               "mark": formats.money(account.low_balance, account.currency)}
    subject = gettext("%(account)s: prepaid credit is low (%(balance)s left)") % figures
    body = gettext("Billing account %(account)s (%(slug)s) has %(balance)s of prepaid credit left, at or below its "
                   "low-balance mark of %(mark)s. At zero, new submissions are refused until finance tops it up."
                   ) % figures
    return subject, body + "\n"


def _send_low_balance(account: BillingAccount, balance: CreditBalance) -> None:
    """One notice per workspace the account pays for (its owners and finance, and its webhook); a person in
    several of them is told once."""
    told: set[int] = set()
    texts_ = written_in_english(lambda: _low_balance_texts(account, balance))
    workspaces = AccountWorkspace.workspace.field.related_model.objects.filter(
        pk__in=debited_workspace_ids(account)).order_by("slug")
    for workspace in workspaces:
        users = tuple(u for u in budget_recipients(workspace) if u.pk not in told)
        told.update(u.pk for u in users)
        raise_notice(Notice(
            event="budget.alert", workspace=workspace, users=users, **texts_, link="/reports/",
            data={"kind": "credit.low", "account": account.slug, "balance": str(balance.balance),
                  "low_balance": str(account.low_balance), "currency": account.currency,
                  "submissions_blocked": balance.exhausted}))
    log.info("low credit alert: %s has %s %s", account.slug, balance.balance, account.currency)
