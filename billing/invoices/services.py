"""Issuing invoices and credit notes, and recording payments.

An invoice sums a closed month's ledger lines per workspace and service; each line's tax is worked out
on its rounded amount and rounded once, and the totals are sums of those rounded figures. A number is
taken from the account's sequence under a row lock in the same transaction that writes the document:
a failure rolls both back, and no two documents ever share a number.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils.translation import gettext

from billing import pricing
from billing.ledger import periods
from billing.ledger.periods import period_bounds
from billing.models import (
    AccountWorkspace,
    BillingAccount,
    ChargeLine,
    ClosedPeriod,
    Invoice,
    InvoiceLine,
    InvoicePayment,
    InvoiceSequence,
)
from billing.time_zone import platform_tz
from scheduling.api import Conflict, DomainError, Forbidden, clock

log = logging.getLogger(__name__)
MAX_REASON = 500
# the order lines are listed in within a workspace
SERVICES = ("compute", "storage", "adjustment", "credit")


class InvoiceError(DomainError):
    field = "month"


def net_days() -> int:
    """settings.BILLING_INVOICE_NET_DAYS: days from issue to due date (30 unless set)."""
    return int(getattr(settings, "BILLING_INVOICE_NET_DAYS", 30))


def invoice_language(account: BillingAccount) -> str:
    """CNY accounts are invoiced in Chinese; others in the platform's language."""
    return "zh-hans" if account.currency == "CNY" else settings.LANGUAGE_CODE


def tax_of(amount: Decimal, rate: Decimal, currency: str) -> Decimal:
    """The tax of one line: its rounded amount times the rate, rounded once to the minor unit."""
    return pricing.quantize_money(amount * rate / Decimal(100), currency)


def service_of(category: str, resource: str) -> str:
    if category == ChargeLine.Category.USAGE:
        return "storage" if resource == ChargeLine.Resource.STORAGE else "compute"
    return "adjustment" if category == ChargeLine.Category.ADJUSTMENT else "credit"


def manages(user, account: BillingAccount) -> bool:
    """Finance of an account: staff, or the finance member of every workspace it holds."""
    if not getattr(user, "is_authenticated", False):
        return False
    if user.is_staff:
        return True
    links = list(AccountWorkspace.objects.filter(account=account).values_list("workspace_id", flat=True))
    if not links:
        return False
    financed = set(user.memberships.filter(workspace_id__in=links, role="finance").values_list("workspace_id", flat=True))
    return financed == set(links)


def require_manager(user, account: BillingAccount) -> None:
    if not manages(user, account):
        raise Forbidden(gettext("Only finance may issue, correct or mark %(account)s's invoices.") % {
            "account": account.slug})


def parse_month(raw) -> date:
    if isinstance(raw, date):
        return raw.replace(day=1)
    try:
        return periods.parse_month(str(raw).strip())
    except periods.MonthError:
        raise InvoiceError(gettext("month: %(value)s is not a month (YYYY-MM)") % {"value": repr(str(raw)[:20])}) from None


def open_workspaces(account: BillingAccount, month: date) -> list[str]:
    """Slugs of the account's workspaces whose `month` is not closed."""
    links = AccountWorkspace.objects.filter(account=account).select_related("workspace")
    closed = set(ClosedPeriod.objects.filter(period=month, workspace_id__in=links.values("workspace_id"))
                 .values_list("workspace_id", flat=True))
    return sorted(link.workspace.slug for link in links if link.workspace_id not in closed)


def _next_number(account: BillingAccount, year: int, kind: str) -> str:
    """Raise the account's sequence for `year` and `kind` under a row lock and give its number."""
    InvoiceSequence.objects.get_or_create(account=account, year=year, kind=kind)
    sequence = InvoiceSequence.objects.select_for_update().get(account=account, year=year, kind=kind)
    sequence.last += 1
    sequence.save(update_fields=["last"])
    prefix = account.invoice_prefix or f"{account.slug.upper()}-"
    middle = "CN" if kind == Invoice.Kind.CREDIT_NOTE else ""
    return f"{prefix}{middle}{year}-{sequence.last:04d}"


@dataclass(frozen=True)
class DraftLine:
    workspace: object
    service: str
    amount: Decimal


def draft_lines(account: BillingAccount, month: date) -> list[DraftLine]:
    """The month's ledger lines of the account's workspaces, summed per workspace and service."""
    links = list(AccountWorkspace.objects.filter(account=account).select_related("workspace")
                 .order_by("workspace__slug"))
    sums: dict[tuple[int, str], Decimal] = defaultdict(Decimal)
    rows = (ChargeLine.objects.filter(period=month, workspace_id__in=[link.workspace_id for link in links])
            .order_by().values_list("workspace_id", "category", "resource", "currency").annotate(s=Sum("cost")))
    for workspace_id, category, resource, currency, total in rows:
        if currency != account.currency:
            slug = next(link.workspace.slug for link in links if link.workspace_id == workspace_id)
            raise InvoiceError(gettext("currency: %(workspace)s billed %(month)s in %(currency)s, but %(account)s is "
                                       "invoiced in %(account_currency)s") % {
                "workspace": slug, "month": f"{month:%Y-%m}", "currency": currency, "account": account.slug,
                "account_currency": account.currency}, field="currency")
        sums[workspace_id, service_of(category, resource)] += Decimal(str(total or 0))
    out = []
    for link in links:
        for service in SERVICES:
            if (link.workspace_id, service) in sums:
                amount = pricing.quantize_money(sums[link.workspace_id, service], account.currency)
                out.append(DraftLine(workspace=link.workspace, service=service, amount=amount))
    return out


@transaction.atomic  # the number and the document it names: both written, or neither
def _write(account: BillingAccount, *, kind: str, period: date, lines: list[DraftLine | tuple], user, now: datetime,
           corrects: Invoice | None = None, reason: str = "", tax_rate: Decimal | None = None) -> Invoice:
    today = now.astimezone(platform_tz()).date()
    currency = account.currency
    rate = account.tax_rate if tax_rate is None else tax_rate
    figures = []
    for line in lines:
        tax = tax_of(line.amount, rate, currency)
        figures.append((line, tax))
    subtotal = sum((line.amount for line, _ in figures), Decimal(0))
    tax_total = sum((tax for _, tax in figures), Decimal(0))
    invoice = Invoice.objects.create(
        account=account, kind=kind, number=_next_number(account, today.year, kind), period=period, issued_on=today,
        due_on=today + timedelta(days=net_days()), currency=currency, tax_rate=rate,
        subtotal=pricing.quantize_money(subtotal, currency), tax=pricing.quantize_money(tax_total, currency),
        total=pricing.quantize_money(subtotal + tax_total, currency), account_name=account.name,
        account_address=account.address, account_tax_id=account.tax_id, language=invoice_language(account),
        corrects=corrects, reason=reason, issued_at=now, issued_by=user if getattr(user, "pk", None) else None)
    InvoiceLine.objects.bulk_create(InvoiceLine(
        invoice=invoice, position=n, workspace=line.workspace, workspace_name=line.workspace.name if line.workspace else "",
        service=line.service, description=getattr(line, "description", ""), amount=line.amount, tax=tax,
        total=line.amount + tax) for n, (line, tax) in enumerate(figures, start=1))
    return invoice


def _issue(account: BillingAccount, month: date, user, now: datetime) -> Invoice | None:
    lines = draft_lines(account, month)
    if not lines:
        return None
    try:
        with transaction.atomic():
            return _write(account, kind=Invoice.Kind.INVOICE, period=month, lines=lines, user=user, now=now)
    except IntegrityError:
        # another request issued this month's invoice first
        raise Conflict(gettext("month: %(account)s's invoice for %(month)s is already issued") % {
            "account": account.slug, "month": f"{month:%Y-%m}"}, field="month") from None


def _check_closed(account: BillingAccount, month: date) -> None:
    still_open = open_workspaces(account, month)
    if still_open:
        raise InvoiceError(gettext("month: %(month)s is still open for %(workspaces)s; close it before invoicing") % {
            "month": f"{month:%Y-%m}", "workspaces": ", ".join(still_open)}, field="month")


@transaction.atomic
def issue_invoice(*, user, account: BillingAccount, month, now: datetime | None = None) -> Invoice | None:
    """Finance issues `account`'s invoice for `month` (every workspace's month closed). None: nothing to bill."""
    require_manager(user, account)
    month = parse_month(month)
    if account.prepaid:
        raise InvoiceError(gettext("account: %(account)s runs on prepaid credit and gets no invoice") % {
            "account": account.slug}, field="account")
    _check_closed(account, month)
    if Invoice.objects.filter(account=account, period=month, kind=Invoice.Kind.INVOICE).exists():
        raise Conflict(gettext("month: %(account)s's invoice for %(month)s is already issued") % {
            "account": account.slug, "month": f"{month:%Y-%m}"}, field="month")
    return _issue(account, month, user, now or clock.now())


@transaction.atomic
def issue_invoices(*, user, month, now: datetime | None = None) -> list[Invoice]:
    """Finance's "issue invoices for YYYY-MM": every invoiced account not yet invoiced for the month. Refused,
    with nothing issued, while any of them has a workspace whose month is open."""
    if not getattr(user, "is_staff", False):
        raise Forbidden(gettext("Only finance may issue, correct or mark invoices."))
    month = parse_month(month)
    now = now or clock.now()
    if period_bounds(month)[1] > now:
        raise InvoiceError(gettext("month: %(month)s has not ended") % {"month": f"{month:%Y-%m}"}, field="month")
    done = set(Invoice.objects.filter(period=month, kind=Invoice.Kind.INVOICE).values_list("account_id", flat=True))
    accounts = [a for a in BillingAccount.objects.filter(prepaid=False, workspace_links__isnull=False).distinct()
                if a.pk not in done]
    still_open = {a.slug: open_workspaces(a, month) for a in accounts}
    if any(still_open.values()):
        raise InvoiceError(gettext("month: %(month)s is still open for %(workspaces)s; close it before invoicing") % {
            "month": f"{month:%Y-%m}", "workspaces": ", ".join(w for ws in still_open.values() for w in ws)},
            field="month")
    return [invoice for account in accounts if (invoice := _issue(account, month, user, now)) is not None]


def issue_when_closed(workspace, month: date, *, user, now: datetime) -> Invoice | None:
    """After a month is closed: the workspace's account gets its invoice once all its workspaces are closed."""
    link = AccountWorkspace.objects.select_related("account").filter(workspace=workspace).first()
    if link is None or link.account.prepaid or open_workspaces(link.account, month):
        return None
    if Invoice.objects.filter(account=link.account, period=month, kind=Invoice.Kind.INVOICE).exists():
        return None
    try:
        return _issue(link.account, month, user, now)
    except DomainError as error:  # the close stands; finance issues it once the cause is fixed
        log.warning("no invoice for %s %s at close: %s", link.account.slug, f"{month:%Y-%m}", error)
        return None


def remaining(invoice: Invoice) -> Decimal:
    """An invoice's total less its credit notes'."""
    credited = invoice.credit_notes.aggregate(s=Sum("total"))["s"] or Decimal(0)
    return pricing.quantize_money(invoice.total - Decimal(str(credited)), invoice.currency)


@dataclass(frozen=True)
class _Correction:
    workspace: object
    amount: Decimal
    service: str = "correction"
    description: str = ""


@transaction.atomic
def issue_credit_note(*, user, invoice: Invoice, amount, reason: str, now: datetime | None = None) -> Invoice:
    """A credit note of `amount` before tax (at the invoice's rate), never above what is left of the invoice."""
    invoice = Invoice.objects.select_for_update().select_related("account").get(pk=invoice.pk)
    require_manager(user, invoice.account)
    if invoice.kind != Invoice.Kind.INVOICE:
        raise InvoiceError(gettext("invoice: %(number)s is a credit note; correct the invoice itself") % {
            "number": invoice.number}, field="invoice")
    try:
        value = Decimal(str(amount).strip())
    except (InvalidOperation, ValueError):
        raise InvoiceError(gettext("amount: %(amount)s is not a number") % {"amount": repr(str(amount)[:40])},
                           field="amount") from None
    if not value.is_finite() or value <= 0:
        raise InvoiceError(gettext("amount: must be more than 0"), field="amount")
    value = pricing.quantize_money(value, invoice.currency)
    left = remaining(invoice)
    if value + tax_of(value, invoice.tax_rate, invoice.currency) > left:
        raise InvoiceError(gettext("amount: with tax it would be more than the %(left)s %(currency)s left on "
                                   "%(number)s") % {"left": left, "currency": invoice.currency,
                                                    "number": invoice.number}, field="amount")
    reason = str(reason or "").strip()
    if not reason or len(reason) > MAX_REASON or "\x00" in reason:
        raise InvoiceError(gettext("reason: say why, in at most %(most)s characters") % {"most": MAX_REASON},
                           field="reason")
    line = _Correction(workspace=None, amount=value, description=reason)
    return _write(invoice.account, kind=Invoice.Kind.CREDIT_NOTE, period=invoice.period, lines=[line], user=user,
                  now=now or clock.now(), corrects=invoice, reason=reason, tax_rate=invoice.tax_rate)


@transaction.atomic
def mark_paid(*, user, invoice: Invoice, paid_on, now: datetime | None = None) -> InvoicePayment:
    require_manager(user, invoice.account)
    now = now or clock.now()
    if invoice.kind != Invoice.Kind.INVOICE:
        raise InvoiceError(gettext("invoice: a credit note is not paid"), field="invoice")
    if isinstance(paid_on, str):
        try:
            paid_on = date.fromisoformat(paid_on.strip())
        except ValueError:
            raise InvoiceError(gettext("paid_on: %(value)s is not a date (YYYY-MM-DD)") % {
                "value": repr(paid_on[:20])}, field="paid_on") from None
    if not isinstance(paid_on, date):
        raise InvoiceError(gettext("paid_on: give the date it was paid"), field="paid_on")
    if paid_on > now.astimezone(platform_tz()).date() or paid_on < invoice.issued_on:
        raise InvoiceError(gettext("paid_on: must be between the issue date and today"), field="paid_on")
    if InvoicePayment.objects.filter(invoice=invoice).exists():
        raise Conflict(gettext("invoice: %(number)s is already marked paid") % {"number": invoice.number},
                       field="invoice")
    return InvoicePayment.objects.create(invoice=invoice, paid_on=paid_on, recorded_at=now, recorded_by=user)
