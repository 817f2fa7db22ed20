"""Consolidating ledger lines of several currencies into one reporting currency.

A converted line is one ledger line's amounts times the rate of its rate day (billing.exchange_rates.rate_day:
its own day or its billing month's last, by the operator's setting), each rounded once to the reporting
currency's minor unit. Every consolidated figure (a grouped row, a total, an export's line) is an exact sum
of converted lines, so the costs API, the reports, the exports and the statements agree to the cent, whatever
the grouping, and a total always equals the sum of the rows shown with it.

Beside each converted figure stays what it came from: x_OriginalCost, x_OriginalCurrency and x_ExchangeRate
(the rate; for a row of many days at different rates, the amount-weighted rate: converted before rounding
divided by the original).
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from django.db.models import Max, Min, QuerySet

from billing.exchange_rates import RATE_PLACES, RateBook, rate_day, rule, today
from billing.ledger.periods import month_end
from billing.pricing import quantize_money

CONVERTED = ("cost", "list_cost", "exclusive_cost")
ORIGINAL = ("x_OriginalCost", "x_OriginalCurrency", "x_ExchangeRate")


def rate_book(rows: QuerySet, target: str) -> RateBook:
    """The rates into `target` the lines of `rows` need, read in one query."""
    bounds = rows.order_by().aggregate(first=Min("day"), last=Max("day"), last_period=Max("period"))
    days = [d for d in (bounds["first"], bounds["last"]) if d is not None]
    if bounds["last_period"] is not None:
        days.append(min(month_end(bounds["last_period"]), today()))
    return RateBook(target, days)


def convert_groups(rows: QuerySet, group: Sequence[str], target: str, *, rendered: dict | None = None,
                   book: RateBook | None = None) -> dict[tuple, dict]:
    """Per (group values..., original currency): the converted sums of CONVERTED, the original cost, and the
    rate. Raises MissingRate for the first line of a day and pair with no rate."""
    book = book or rate_book(rows, target)
    chosen = rule()
    lines = (rows.order_by().annotate(**(rendered or {}))
             .values_list(*group, "currency", "day", "period", *CONVERTED))
    out: dict[tuple, dict] = {}
    width = len(group) + 1
    for line in lines.iterator(chunk_size=5000):
        key = tuple(line[:width])
        currency, day, period = line[width - 1], line[width], line[width + 1]
        rate = book.rate(currency, rate_day(day, period, chosen=chosen))
        acc = out.get(key)
        if acc is None:
            acc = out[key] = {**dict.fromkeys(CONVERTED, Decimal(0)), "original": Decimal(0), "exact": Decimal(0),
                              "rates": set()}
        for name, amount in zip(CONVERTED, line[width + 2:], strict=True):
            acc[name] += quantize_money(Decimal(amount) * rate, target)
        acc["original"] += Decimal(line[width + 2])
        acc["exact"] += Decimal(line[width + 2]) * rate
        acc["rates"].add(rate)
    return out


def row_rate(acc: dict) -> Decimal | None:
    """The one rate a row was converted at, else the amount-weighted rate (None for a row of no amount)."""
    if len(acc["rates"]) == 1:
        return next(iter(acc["rates"]))
    if not acc["original"]:
        return None
    return (acc["exact"] / acc["original"]).quantize(RATE_PLACES)


def consolidate_rows(rows: list[dict], converted: dict[tuple, dict], group: Sequence[str], target: str) -> list[dict]:
    """The selector's grouped rows (each in its original currency) with their money in `target` and the
    original cost, currency and rate beside it."""
    for row in rows:
        acc = converted.get((*(row[c] for c in group), row["currency"]))
        original = row["currency"]
        row["x_OriginalCost"], row["x_OriginalCurrency"] = row["cost"], original
        if acc is None:  # a group with no line cannot come back from the database; kept safe
            acc = {**dict.fromkeys(CONVERTED, Decimal(0)), "rates": set(), "original": Decimal(0)}
        row["x_ExchangeRate"] = row_rate(acc)
        for name in CONVERTED:
            row[name] = acc[name]
        row["currency"] = target
    return rows


def total_of(rows: list[dict], target: str) -> list[tuple[str, Decimal]]:
    return [(target, quantize_money(sum((r["cost"] for r in rows), Decimal(0)), target))]


def consolidated_total(rows: QuerySet, target: str) -> Decimal:
    """The sum of the lines' converted costs: what a consolidated export's BilledCost column adds up to."""
    converted = convert_groups(rows, (), target)
    return quantize_money(sum((acc["cost"] for acc in converted.values()), Decimal(0)), target)
