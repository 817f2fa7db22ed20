"""Reads of the ledger that every surface shares."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime
from decimal import Decimal

from django.db.models import Max, QuerySet, Sum

from billing import pricing
from billing.currency import currency_at, currency_in, default_currency
from billing.ledger.kept import ledger_read
from billing.models import ChargeLine, LedgerCursor


def ledger_cursor() -> LedgerCursor:
    return LedgerCursor.objects.filter(pk=1).first() or LedgerCursor(pk=1)


class MixedCurrencies(ValueError):
    """A sum was asked of lines in more than one currency: a caller forgot to split it per currency."""


def money_sum(rows: QuerySet[ChargeLine], currency: str | None = None) -> Decimal:
    """The sum of the lines' costs (of `currency`'s lines only, when given), exact: each line is in the
    currency's minor unit. Lines of two currencies are never added (MixedCurrencies)."""
    if currency is not None:
        rows = rows.filter(currency=currency)
    sums = list(rows.order_by().values_list("currency").annotate(s=Sum("cost")))
    if len(sums) > 1:
        raise MixedCurrencies(f"lines in {', '.join(sorted(c for c, _ in sums))} cannot be added up")
    if not sums:
        return pricing.quantize_money(Decimal(0), currency or default_currency())
    found, total = sums[0]
    return pricing.quantize_money(Decimal(str(total or 0)), found)  # only drops the zeros a database sum may add


def sums_by_currency(rows: QuerySet[ChargeLine]) -> list[tuple[str, Decimal]]:
    """(currency, sum of the lines' costs) for each currency the lines are in, by currency code."""
    sums = rows.order_by().values_list("currency").annotate(s=Sum("cost")).order_by("currency")
    return [(currency, pricing.quantize_money(Decimal(str(total or 0)), currency)) for currency, total in sums]


def job_total(job_id: int) -> Decimal:
    return money_sum(ChargeLine.objects.filter(job_id=job_id))


def array_total(parent_id: int) -> Decimal:
    """What an array's indices have cost (each child carries its own lines; the parent none)."""
    return money_sum(ChargeLine.objects.filter(job__array_parent_id=parent_id))


def job_totals(job_ids: Iterable[int]) -> dict[int, tuple[Decimal, str]]:
    """`job_total` for many jobs in one query: job id -> (sum of its lines, currency). A job with no
    line is left out."""
    ids = list(job_ids)
    if not ids:
        return {}
    rows = (ChargeLine.objects.filter(job_id__in=ids).order_by()
            .values_list("job_id", "currency").annotate(total=Sum("cost")))
    # one currency per workspace; quantize drops the digits a database sum may add
    return {job_id: (pricing.quantize_money(Decimal(str(total or 0)), currency), currency)
            for job_id, currency, total in rows}


def as_of(rows: QuerySet[ChargeLine]) -> datetime | None:
    """The time of the latest usage included: the last full post, or later where a line was
    refreshed since (by its job's own ingest)."""
    posted = ledger_cursor().posted_until
    latest = ledger_read(rows, lambda: rows.order_by().aggregate(m=Max("computed_at"))["m"], also=("as_of",))
    return max((t for t in (posted, latest) if t is not None), default=None)


def workspace_currency(workspace, month: date | None = None) -> str:
    """The currency a workspace is billed in for the billing month starting `month` (default: now)."""
    return currency_in(workspace, month) if month is not None else currency_at(workspace)


def job_currency(job) -> str:
    """The currency of a job's lines (one: a workspace's currency never changes under an unfinished
    job), else the currency its workspace bills in now."""
    found = ChargeLine.objects.filter(job=job).order_by().values_list("currency", flat=True).first()
    return found or currency_at(job.workspace_id)


def recent_adjustments(limit: int = 25) -> QuerySet[ChargeLine]:
    """The latest adjustments and credits of every workspace, newest written first (operators only)."""
    return (ChargeLine.objects.exclude(category=ChargeLine.Category.USAGE)
            .select_related("workspace", "author", "job").order_by("-computed_at", "-id")[:limit])
