"""Writes behind the reports: budgets with their alerts, background exports."""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import translation
from django.utils.translation import gettext

from billing import history_catalogue as texts
from billing import pricing
from billing.accounts import account_of, account_workspace_ids, paying_for, workspaces_paid_by
from billing.credits import check_credit_allows_submit, check_credits, require_account_finance
from billing.currency import currency_at
from billing.ledger.periods import period_bounds, period_start
from billing.ledger.selectors import as_of as ledger_as_of
from billing.ledger.selectors import money_sum
from billing.models import (
    AccountBudget,
    AccountBudgetAlert,
    BillingAccount,
    Budget,
    BudgetAlert,
    ChargeLine,
    ReportExport,
)
from billing.notices import Notice, budget_recipients, raise_notice, written_in_english
from billing.time_zone import platform_tz
from scheduling.api import DomainError, clock, formats, release_suspended, said, send_task, suspend_jobs
from scheduling.models import FINAL_STATES, Job

log = logging.getLogger(__name__)
ZERO = Decimal(0)
HOUR = timedelta(hours=1)
SHARING_NAMES = {"whole": "exclusive"}  # the slice kind "whole" is what quotes call exclusive


def day_bounds(day: date) -> tuple[datetime, datetime]:
    """Start and end of a day in the platform's time zone."""
    tz = platform_tz()
    start = datetime.combine(day, time(0), tzinfo=tz)
    return start, datetime.combine(day + timedelta(days=1), time(0), tzinfo=tz)


# --------------------------------------------------------------------------- budgets

DEFAULT_THRESHOLDS = (50, 80, 100)


def spent_in_period(workspace, *, now: datetime | None = None) -> Decimal:
    """The sum of the workspace's ledger lines of this month: the figure its statement bills."""
    now = now or clock.now()
    return money_sum(ChargeLine.objects.filter(workspace=workspace, period=period_start(now)))


def parse_thresholds(raw: str) -> tuple[int, ...]:
    """"50, 80,100" -> (50, 80, 100): whole percentages from 1 to 1000, each once."""
    try:
        values = sorted({int(part) for part in str(raw).replace(";", ",").split(",") if part.strip()})
    except ValueError:
        raise BudgetError(gettext("thresholds: whole percentages separated by commas, e.g. 50,80,100"),
                          field="thresholds") from None
    if not values or len(values) > 10 or not all(1 <= v <= 1000 for v in values):
        raise BudgetError(gettext("thresholds: 1 to 10 percentages, each from 1 to 1000"), field="thresholds")
    return tuple(values)


def _can_manage(user, workspace):
    membership = workspace.memberships.filter(user=user).first() if user.is_authenticated else None
    if membership is None or not membership.can_manage_budget:
        raise PermissionDenied(gettext("Only the workspace's owners and finance may set its budget."))
    return membership


class BudgetError(DomainError):
    field = "amount"


MAX_BUDGET = Decimal("1e12")  # Budget.amount holds 14 digits, 2 after the point


def set_budget(*, user, workspace, amount: Decimal | str, currency: str | None = None,
               block_at_limit: bool = False, suspend_preemptible: bool = False,
               thresholds: str | None = None) -> Budget:
    """Create or change a workspace's monthly budget, in the currency the workspace is billed in (the
    default; another is refused). Only an owner may block submissions."""
    membership = _can_manage(user, workspace)
    billed = currency_at(workspace)
    currency = str(currency or billed).strip().upper()
    try:
        places = pricing.minor_unit(currency)
    except ValueError as error:
        raise BudgetError(str(error)[:200], field="currency") from None
    if currency != billed:
        raise BudgetError(f"{workspace.slug} is billed in {billed}: its budget is in {billed} too", field="currency")
    try:
        amount = Decimal(str(amount).strip())
    except ArithmeticError:
        raise BudgetError(gettext("budget amount %(amount)s is not a number") % {"amount": repr(str(amount)[:40])}) from None
    if not amount.is_finite() or amount <= 0 or amount >= MAX_BUDGET:
        raise BudgetError(gettext("budget amount must be a positive number below %(most)s") % {"most": f"{MAX_BUDGET:,.0f}"})
    amount = pricing.quantize_money(amount, currency)
    if amount <= 0:  # e.g. 0.001 USD: stored as 0, then every percentage divides by zero
        raise BudgetError(gettext("budget amount must be at least %(least)s %(currency)s") % {
            "least": Decimal(1).scaleb(-places), "currency": currency})
    current = Budget.objects.filter(workspace=workspace).first()
    if not membership.can_block_submissions and (
            block_at_limit != bool(current and current.block_at_limit)
            or suspend_preemptible != bool(current and current.suspend_preemptible)):
        raise PermissionDenied(gettext("Only an owner may choose to block submissions or suspend jobs at the limit."))
    levels = parse_thresholds(thresholds) if thresholds is not None else (
        parse_thresholds(current.thresholds) if current else DEFAULT_THRESHOLDS)
    budget, _ = Budget.objects.update_or_create(
        workspace=workspace, defaults={"amount": amount, "currency": currency, "block_at_limit": block_at_limit,
                                       "suspend_preemptible": suspend_preemptible,
                                       "thresholds": ",".join(map(str, levels))})
    if not budget_status(workspace).exhausted:
        release_suspended(workspace)
    return budget


@dataclass(frozen=True)
class BudgetStatus:
    budget: Budget
    spent: Decimal
    percent: Decimal
    period_start: date
    alerts: list[BudgetAlert]
    as_of: datetime | None

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.budget.amount


def _usable_budget(workspace, now: datetime) -> Budget | None:
    """The workspace's budget, or None when there is none, its stored amount is unusable (0, or an
    overflow SQLite keeps as Infinity: such a row must not break the workspace's pages), or it is in
    another currency than the month's (the workspace's currency changed: its owner sets it again)."""
    try:
        budget = Budget.objects.filter(workspace=workspace).first()
    except ArithmeticError:  # the database value cannot be read back as a Decimal
        log.warning("budget of workspace %s is unreadable; ignored", getattr(workspace, "slug", workspace))
        return None
    if budget is not None and not (budget.amount.is_finite() and budget.amount > 0):
        log.warning("budget of workspace %s has amount %s; ignored", workspace.slug, budget.amount)
        return None
    if budget is not None and budget.currency != currency_at(workspace, now):
        return None
    return budget


def budget_status(workspace, *, now: datetime | None = None) -> BudgetStatus | None:
    now = now or clock.now()
    budget = _usable_budget(workspace, now)
    if budget is None:
        return None
    spent = spent_in_period(workspace, now=now)
    start = period_start(now)
    return BudgetStatus(budget=budget, spent=spent, percent=(spent * 100 / budget.amount).quantize(Decimal("0.1")),
                        period_start=start, alerts=list(budget.alerts.filter(period_start=start)),
                        as_of=ledger_as_of(ChargeLine.objects.filter(workspace=workspace, period=start)))


def check_budget_allows_submit(workspace) -> str | None:
    """Why a new submission must be refused (the workspace, or a billing account that pays for it, spent
    its budget and chose to block; or its prepaid account has no credit left), or None when it may go ahead."""
    status = budget_status(workspace)
    if status is None or not status.budget.block_at_limit or not status.exhausted:
        return _account_refusal(workspace)
    b = status.budget
    return (f"Workspace {workspace.slug} has spent {formats.money(status.spent, b.currency, 'en')} of its "
            f"{formats.money(b.amount, b.currency, 'en')} budget for the month starting {status.period_start}; its owner blocks "
            "new submissions at the limit.")


# --------------------------------------------------------------------------- account budgets


def set_account_budget(*, user, account: BillingAccount, amount: Decimal | str, block_at_limit: bool = False,
                       suspend_preemptible: bool = False, thresholds: str | None = None) -> AccountBudget:
    """Create or change an account's monthly budget, in the account's currency (finance or staff)."""
    require_account_finance(user, account)
    currency = account.currency
    try:
        amount = Decimal(str(amount).strip())
    except ArithmeticError:
        raise BudgetError(gettext("budget amount %(amount)s is not a number") % {"amount": repr(str(amount)[:40])}) from None
    if not amount.is_finite() or amount <= 0 or amount >= MAX_BUDGET:
        raise BudgetError(gettext("budget amount must be a positive number below %(most)s") % {"most": f"{MAX_BUDGET:,.0f}"})
    if amount != pricing.quantize_money(amount, currency):
        raise BudgetError(gettext("%(currency)s amounts have at most %(places)s decimal places") % {
            "currency": currency, "places": pricing.minor_unit(currency)})
    current = AccountBudget.objects.filter(account=account).first()
    levels = parse_thresholds(thresholds) if thresholds is not None else (
        parse_thresholds(current.thresholds) if current else DEFAULT_THRESHOLDS)
    budget, _ = AccountBudget.objects.update_or_create(
        account=account, defaults={"amount": amount, "block_at_limit": block_at_limit,
                                   "suspend_preemptible": suspend_preemptible,
                                   "thresholds": ",".join(map(str, levels))})
    if not account_budget_status(account).exhausted:
        for workspace in _workspaces(account_workspace_ids(account)):
            release_suspended(workspace)
    return budget


def remove_account_budget(*, user, account: BillingAccount) -> bool:
    require_account_finance(user, account)
    deleted, _ = AccountBudget.objects.filter(account=account).delete()
    return bool(deleted)


@dataclass(frozen=True)
class AccountBudgetStatus:
    budget: AccountBudget
    spent: Decimal
    percent: Decimal
    period_start: date
    alerts: list[AccountBudgetAlert]
    not_counted: tuple[str, ...]   # currencies of lines the account's currency does not add up

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.budget.amount


def account_budget_status(account: BillingAccount, *, now: datetime | None = None) -> AccountBudgetStatus | None:
    """This month's spend of the workspaces the account pays for (its sub-accounts' too), in its currency."""
    return account_budget_statuses([account], now=now).get(account.pk)


def account_budget_statuses(accounts, *, now: datetime | None = None) -> dict[int, AccountBudgetStatus]:
    """account_budget_status of each account that has a budget, by id, from one query each for the budgets,
    their alerts, the workspaces and the month's lines of all of them (a page listing accounts)."""
    start = period_start(now or clock.now())
    given = {a.pk: a for a in accounts}
    budgets = {b.account_id: b for b in AccountBudget.objects.filter(account__in=list(given)).select_related("account")}
    if not budgets:
        return {}
    alerts: dict[int, list[AccountBudgetAlert]] = defaultdict(list)
    for alert in AccountBudgetAlert.objects.filter(budget__in=list(budgets.values()), period_start=start):
        alerts[alert.budget_id].append(alert)
    paid = workspaces_paid_by(set(budgets))
    sums: dict[int, dict[str, Decimal]] = defaultdict(dict)  # workspace -> currency -> the month's sum
    lines = ChargeLine.objects.filter(workspace_id__in=set().union(*paid.values()), period=start)
    for workspace_id, currency, total in lines.order_by().values_list("workspace_id", "currency").annotate(s=Sum("cost")):
        sums[workspace_id][currency] = total
    statuses = {}
    for account_id, budget in budgets.items():
        currency = given[account_id].currency
        by_currency = [sums[ws] for ws in paid[account_id]]
        spent = pricing.quantize_money(sum((s.get(currency, ZERO) for s in by_currency), ZERO), currency)
        statuses[account_id] = AccountBudgetStatus(
            budget=budget, spent=spent, percent=(spent * 100 / budget.amount).quantize(Decimal("0.1")),
            period_start=start, alerts=alerts[budget.pk],
            not_counted=tuple(sorted({c for s in by_currency for c in s if c != currency})))
    return statuses


def _paying_accounts(workspace) -> list[BillingAccount]:
    """The workspace's account and, for a sub-account, the account above it."""
    account = account_of(workspace)
    if account is None:
        return []
    return [account] + ([account.parent] if account.parent_id else [])


def _account_refusal(workspace) -> str | None:
    for account in _paying_accounts(workspace):
        status = account_budget_status(account)
        if status is not None and status.budget.block_at_limit and status.exhausted:
            b = status.budget
            return (f"Billing account {account.slug} has spent {formats.money(status.spent, account.currency, 'en')} "
                    f"of its {formats.money(b.amount, account.currency, 'en')} budget for the month starting "
                    f"{status.period_start}; new submissions in {workspace.slug} are refused at the limit.")
    return check_credit_allows_submit(workspace)


def _workspaces(ids):
    return Budget.workspace.field.related_model.objects.filter(pk__in=list(ids)).order_by("slug")


def check_account_budgets(*, now: datetime | None = None, workspace_ids=None) -> list[AccountBudgetAlert]:
    """Fire every account budget threshold crossed this period that has not fired yet."""
    now = now or clock.now()
    budgets = AccountBudget.objects.select_related("account").order_by("account_id")
    if workspace_ids is not None:
        budgets = budgets.filter(paying_for(list(workspace_ids), via="account__")).distinct()
    fired = []
    for budget in budgets:
        try:
            fired += _check_account_budget(budget.account, now)
        except Exception:
            log.exception("budget check of account %s failed", budget.account.slug)
    return fired


def _check_account_budget(account: BillingAccount, now: datetime) -> list[AccountBudgetAlert]:
    status = account_budget_status(account, now=now)
    if status is None:
        return []
    budget = status.budget
    fired = _new_alerts(status, lambda threshold: AccountBudgetAlert.objects.create(
        budget=budget, period_start=status.period_start, threshold=threshold, spent=status.spent,
        percent=status.percent))
    if fired:
        _send_account_alert(account, status, max(fired, key=lambda a: a.threshold))
    if status.exhausted and budget.suspend_preemptible:
        jobs = list(Job.objects.filter(workspace_id__in=account_workspace_ids(account), preemptible=True)
                    .exclude(state__in=FINAL_STATES).exclude(pending_code="budget_suspended"))
        if jobs:
            _, until = period_bounds(status.period_start)
            suspend_jobs(jobs, until=until, reason=said(texts.ACCOUNT_BUDGET_SPENT, account=account.slug,
                                                        percent=status.percent))
    return fired


def _account_alert_texts(account: BillingAccount, status: AccountBudgetStatus, alert: AccountBudgetAlert):
    figures = {"account": account.name, "slug": account.slug, "percent": alert.percent, "threshold": alert.threshold,
               "spent": formats.money(alert.spent, account.currency),
               "budget": formats.money(status.budget.amount, account.currency), "start": alert.period_start}
    subject = gettext("%(account)s: %(percent)s %% of the account's monthly budget spent (alert at %(threshold)s %%)"
                      ) % figures
    body = gettext("Billing account %(account)s (%(slug)s) has spent %(spent)s of its %(budget)s budget for the "
                   "month starting %(start)s: %(percent)s %%.") % figures + "\n"
    if alert.threshold >= 100 and status.budget.block_at_limit:
        body += gettext("New submissions are blocked until the next month or a higher budget.") + "\n"
    return subject, body


def _send_account_alert(account: BillingAccount, status: AccountBudgetStatus, alert: AccountBudgetAlert) -> None:
    """One notice per workspace the account pays for; a person in several of them is told once."""
    texts_ = written_in_english(lambda: _account_alert_texts(account, status, alert))
    told: set[int] = set()
    for workspace in _workspaces(account_workspace_ids(account)):
        users = tuple(u for u in budget_recipients(workspace) if u.pk not in told)
        told.update(u.pk for u in users)
        raise_notice(Notice(
            event="budget.alert", workspace=workspace, users=users, **texts_, link="/reports/",
            data={"kind": "account.budget", "account": account.slug, "threshold": alert.threshold,
                  "percent": str(alert.percent), "spent": str(alert.spent), "budget": str(status.budget.amount),
                  "currency": account.currency, "period_start": alert.period_start.isoformat(),
                  "submissions_blocked": alert.threshold >= 100 and status.budget.block_at_limit}))


def check_budgets(*, now: datetime | None = None, workspace_ids=None) -> list[BudgetAlert]:
    """Fire every threshold crossed this period that has not fired yet; email owners and finance (the
    returned alerts are the workspaces'; accounts' budgets and credit are checked too). Run on every ingested batch (for the workspaces it touched) and after each ledger post."""
    now = now or clock.now()
    fired = []
    # Workspace by workspace: one bad row must not stop the alerts of the others.
    budgets = Budget.objects.order_by("workspace_id")
    touched = None if workspace_ids is None else list(workspace_ids)
    if touched is not None:
        budgets = budgets.filter(workspace_id__in=touched)
    workspace_ids = list(budgets.values_list("workspace_id", flat=True))
    for workspace in Budget.workspace.field.related_model.objects.filter(pk__in=workspace_ids).order_by("pk"):
        try:
            fired += _check_budget(workspace, now)
        except Exception:
            log.exception("budget check of workspace %s failed", workspace.slug)
    # Accounts' budgets and prepaid credit alert the same way, on the same runs
    check_account_budgets(now=now, workspace_ids=touched)
    check_credits(now=now, workspace_ids=touched)
    return fired


def _check_budget(workspace, now: datetime) -> list[BudgetAlert]:
    status = budget_status(workspace, now=now)
    if status is None:
        return []
    budget = status.budget
    fired = _new_alerts(status, lambda threshold: BudgetAlert.objects.create(
        budget=budget, period_start=status.period_start, threshold=threshold, spent=status.spent,
        percent=status.percent, as_of=status.as_of))
    if fired:  # one e-mail, about the highest threshold crossed
        _send_alert(budget, max(fired, key=lambda a: a.threshold))
    if status.exhausted and budget.suspend_preemptible:
        _suspend_preemptible(workspace, status, now)
    return fired


def _new_alerts(status, create) -> list:
    """`create(threshold)` for each threshold the period's spend has crossed; a threshold that already fired this
    period is skipped (the alert's unique constraint refuses it again)."""
    fired = []
    for threshold in parse_thresholds(status.budget.thresholds):
        if status.spent * 100 < status.budget.amount * threshold:
            continue
        try:
            with transaction.atomic():
                fired.append(create(threshold))
        except IntegrityError:
            continue  # already fired this period
    return fired


def _suspend_preemptible(workspace, status: BudgetStatus, now: datetime) -> None:
    jobs = list(Job.objects.filter(workspace=workspace, preemptible=True).exclude(state__in=FINAL_STATES)
                .exclude(pending_code="budget_suspended"))
    if jobs:
        _, until = period_bounds(status.period_start)
        suspend_jobs(jobs, until=until, reason=said(texts.BUDGET_SPENT, percent=status.percent))
        log.info("budget of %s: suspended preemptible jobs %s", workspace.slug, [j.pk for j in jobs])


def _alert_texts(budget: Budget, alert: BudgetAlert) -> tuple[str, str]:
    """The alert's subject and body in the active language."""
    ws = budget.workspace
    figures = {"workspace": ws.name, "slug": ws.slug, "percent": alert.percent, "threshold": alert.threshold,
               "spent": formats.money(alert.spent, budget.currency), "budget": formats.money(budget.amount, budget.currency),
               "start": alert.period_start, "as_of": f"{alert.as_of:%Y-%m-%d %H:%M %Z}" if alert.as_of else ""}
    subject = gettext(
        "%(workspace)s: %(percent)s %% of the monthly budget spent (alert at %(threshold)s %%)") % figures
    if alert.as_of:
        body = gettext("Workspace %(workspace)s (%(slug)s) has spent %(spent)s of its %(budget)s budget for the "
                       "month starting %(start)s as of %(as_of)s: %(percent)s %%.")
    else:
        body = gettext("Workspace %(workspace)s (%(slug)s) has spent %(spent)s of its %(budget)s budget for the "
                       "month starting %(start)s: %(percent)s %%.")
    body = body % figures + "\n"
    if alert.threshold >= 100 and budget.block_at_limit:
        body += gettext("New submissions are blocked until the next month or a higher budget.") + "\n"
    return subject, body


def _send_alert(budget: Budget, alert: BudgetAlert) -> None:
    ws = budget.workspace
    texts = written_in_english(lambda: _alert_texts(budget, alert))
    subject = texts["subject"]
    # E-mail and in-app by each recipient's choices (each in their language), and the workspace's webhook
    # (the portal delivers)
    raise_notice(Notice(
        event="budget.alert", workspace=ws, users=budget_recipients(ws), **texts, link="/reports/",
        data={"threshold": alert.threshold, "percent": str(alert.percent), "spent": str(alert.spent),
              "budget": str(budget.amount), "currency": budget.currency, "period_start": alert.period_start.isoformat(),
              "as_of": alert.as_of.isoformat() if alert.as_of else None,
              "submissions_blocked": alert.threshold >= 100 and budget.block_at_limit}))
    log.info("budget alert: %s", subject)


# --------------------------------------------------------------------------- exports


def start_excel_export(user, filters: dict) -> ReportExport:
    """Record an export for `user` and queue the Celery task that builds it, in the active language (the
    one the user asked in: the file's sheet names and labels). With the broker away the export stays
    queued (the beat sends it again, resend_waiting_exports) instead of failing the request."""
    export = ReportExport.objects.create(user=user, filters={**filters, "language": translation.get_language()})
    transaction.on_commit(lambda: send_task(BUILD_EXCEL_EXPORT, str(export.pk)))
    return export


BUILD_EXCEL_EXPORT = "billing.reports.tasks.build_excel_export"
EXPORT_RESEND_AFTER = timedelta(minutes=1)


def resend_waiting_exports(*, now: datetime) -> int:
    """Exports still queued a while after they were asked for: their task never reached a worker."""
    waiting = ReportExport.objects.filter(state=ReportExport.State.QUEUED, created__lt=now - EXPORT_RESEND_AFTER)
    return sum(send_task(BUILD_EXCEL_EXPORT, str(pk)) for pk in waiting.values_list("pk", flat=True))
