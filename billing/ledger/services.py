"""Writes to the ledger besides posting usage: adjustments and closing a billing month."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils.translation import gettext

from billing import pricing
from billing.invoices.services import issue_when_closed
from billing.ledger.periods import period_bounds
from billing.ledger.posting import close_grace, hour_floor, post_ledger
from billing.ledger.selectors import job_currency, job_total, ledger_cursor, money_sum, workspace_currency
from billing.models import ChargeLine, ClosedPeriod
from billing.time_zone import platform_tz
from scheduling.api import Conflict, DomainError, clock

MAX_AMOUNT = Decimal("1e12")
MAX_REASON = 500


class LedgerError(DomainError):
    field = "amount"


def require_finance(user, workspace) -> None:
    """Adjustments and closing are finance's: the workspace's finance members, or staff."""
    if getattr(user, "is_staff", False):
        return
    membership = workspace.memberships.filter(user=user).first() if user.is_authenticated else None
    if membership is None or membership.role != "finance":
        raise PermissionDenied(gettext("Only finance may adjust or close a workspace's billing."))


def _amount(raw, currency: str) -> Decimal:
    try:
        amount = Decimal(str(raw).strip())
    except (InvalidOperation, ValueError):
        raise LedgerError(gettext("amount: %(amount)s is not a number") % {"amount": repr(str(raw)[:40])}) from None
    if not amount.is_finite() or abs(amount) >= MAX_AMOUNT:
        raise LedgerError(gettext("amount: must be a number of magnitude below %(most)s") % {"most": f"{MAX_AMOUNT:,.0f}"})
    amount = pricing.quantize_money(amount, currency)
    if amount == 0:
        raise LedgerError(gettext("amount: must not round to 0 %(currency)s") % {"currency": currency})
    return amount


def _reason(raw) -> str:
    reason = str(raw or "").strip()
    if not reason:
        raise LedgerError(gettext("reason: say why the adjustment is made"), field="reason")
    if "\x00" in reason or len(reason) > MAX_REASON:
        raise LedgerError(gettext("reason: at most %(most)s characters, no NUL") % {"most": MAX_REASON}, field="reason")
    return reason


def check_adjustment_period(workspace, month: date, now: datetime) -> None:
    """Refuse a month that cannot take an adjustment: one that has not started, or is closed."""
    if month > now.astimezone(platform_tz()).date().replace(day=1):
        raise LedgerError(gettext("%(month)s has not started") % {"month": f"{month:%Y-%m}"}, field="period")
    if ClosedPeriod.objects.filter(workspace=workspace, period=month).exists():
        raise Conflict(gettext("%(month)s is closed for %(workspace)s: nothing more may be billed in it") % {
            "month": f"{month:%Y-%m}", "workspace": workspace.slug}, field="period")


def _adjustment_time(workspace, period: date | None, now: datetime) -> datetime:
    """When the line is booked: now for the current month; a past month's last instant for that month."""
    current = now.astimezone(platform_tz()).date().replace(day=1)
    month = current if period is None else period.replace(day=1)
    check_adjustment_period(workspace, month, now)
    return now if month == current else period_bounds(month)[1] - timedelta(microseconds=1)


@transaction.atomic
def add_adjustment(*, user, workspace, amount, reason: str, job=None, period: date | None = None,
                   now: datetime | None = None) -> ChargeLine:
    """A debit (positive) or credit (negative): billed history is never edited, a correction is a line
    of its own with its reason and author. It is booked now, in the current month, or in `period` (an
    earlier month that is not closed); with `job` (one of the workspace's) it is part of that job's cost."""
    require_finance(user, workspace)
    now = now or clock.now()
    if job is not None and job.workspace_id != workspace.pk:
        raise LedgerError(gettext("#%(job)s is not a job of %(workspace)s") % {"job": job.pk, "workspace": workspace.slug},
                          field="job")
    at = _adjustment_time(workspace, period, now)
    day = at.astimezone(platform_tz()).date()
    currency = workspace_currency(workspace, day.replace(day=1))  # the month's: a month has one currency
    if job is not None and (billed := job_currency(job)) != currency:
        raise LedgerError(f"#{job.pk} was billed in {billed} and {workspace.slug} bills {day:%Y-%m} in {currency}: "
                          "adjust the month the job ran in instead", field="job")
    amount, reason = _amount(amount, currency), _reason(reason)
    category = ChargeLine.Category.CREDIT if amount < 0 else ChargeLine.Category.ADJUSTMENT
    line = ChargeLine.objects.create(
        category=category, hour=hour_floor(at), day=day, period=day.replace(day=1), charge_start=at,
        charge_end=at, workspace=workspace, cost=amount, list_cost=amount, exclusive_cost=amount,
        currency=currency, provisional=False, computed_at=now, reason=reason, author=user,
        job=job, job_name=job.name if job else "", queue=job.queue.name if job else "",
        submitter=job.submitted_by.get_username() if job and job.submitted_by_id else "", slice="", sku_id="",
    )
    if job is not None and job.final_cost is not None:
        # a finished job's final cost is the sum of its lines, this one included
        job.final_cost = job_total(job.pk)
        job.save(update_fields=["final_cost"])
    return line


@transaction.atomic
def close_period(*, user, workspace, month: date, now: datetime | None = None) -> ClosedPeriod:
    """Freeze a workspace's month once it has ended and its last hour is final; when it is the last open
    one of its billing account's workspaces, the account's invoice for the month is issued with it."""
    require_finance(user, workspace)
    now = now or clock.now()
    month = month.replace(day=1)
    _, end = period_bounds(month)
    if now < end + close_grace():
        raise Conflict(gettext("%(month)s has not ended (its last hour is final at %(final)s)") % {
            "month": f"{month:%Y-%m}", "final": f"{end + close_grace():%Y-%m-%d %H:%M %Z}"}, field="month")
    if ClosedPeriod.objects.filter(workspace=workspace, period=month).exists():
        raise Conflict(gettext("%(month)s is already closed for %(workspace)s") % {
            "month": f"{month:%Y-%m}", "workspace": workspace.slug}, field="month")
    post_ledger(now=now)
    cursor = ledger_cursor()
    if cursor.closed_until is None or cursor.closed_until < end:
        raise Conflict(gettext("the ledger is not final up to %(end)s; try again shortly") % {
            "end": f"{end:%Y-%m-%d %H:%M %Z}"}, field="month")
    from billing.chargeback import post_chargeback  # noqa: PLC0415  (chargeback reads the ledger)

    post_chargeback(month, now=now)  # the month's idle shares are its lines too: posted before it is frozen
    lines = ChargeLine.objects.filter(workspace=workspace, period=month)
    currency = workspace_currency(workspace, month)
    closed = ClosedPeriod.objects.create(workspace=workspace, period=month, closed_at=now, closed_by=user,
                                         total=money_sum(lines), currency=currency)
    issue_when_closed(workspace, month, user=user, now=now)  # the last of an account's workspaces: its invoice
    return closed
