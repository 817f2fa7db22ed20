"""Reads of the ledger that every surface shares."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal

from django.db.models import Max, QuerySet, Sum

from billing import pricing
from billing.models import Budget, ChargeLine, LedgerCursor, PriceTable


def ledger_cursor() -> LedgerCursor:
    return LedgerCursor.objects.filter(pk=1).first() or LedgerCursor(pk=1)


def money_sum(rows: QuerySet[ChargeLine]) -> Decimal:
    """The sum of the lines' costs, exact (each line is in the currency's minor unit)."""
    total = rows.aggregate(s=Sum("cost"))["s"] or Decimal(0)
    currency = rows.order_by().values_list("currency", flat=True).first() or "USD"
    return pricing.quantize_money(total, currency)  # only drops the zeros a database sum may add


def job_total(job_id: int) -> Decimal:
    return money_sum(ChargeLine.objects.filter(job_id=job_id))


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
    latest = rows.aggregate(m=Max("computed_at"))["m"]
    return max((t for t in (posted, latest) if t is not None), default=None)


def workspace_currency(workspace) -> str:
    """The currency a workspace is billed in: its lines', else its budget's, else the price list's."""
    for source in (ChargeLine.objects.filter(workspace=workspace), Budget.objects.filter(workspace=workspace),
                   PriceTable.objects.all()):
        currency = source.values_list("currency", flat=True).first()
        if currency:
            return currency
    return "USD"


def recent_adjustments(limit: int = 25) -> QuerySet[ChargeLine]:
    """The latest adjustments and credits of every workspace, newest written first (operators only)."""
    return (ChargeLine.objects.exclude(category=ChargeLine.Category.USAGE)
            .select_related("workspace", "author", "job").order_by("-computed_at", "-id")[:limit])
