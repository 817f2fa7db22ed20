"""Dated exchange rates, and the one rule that turns an amount of one currency into another.

Rates are stored per pair and day (ExchangeRate: 1 base = rate quote). The ECB's reference rates are rates
per 1 EUR; any other pair is derived through EUR (1 CNY in USD = EUR->USD / EUR->CNY), so one import of the
ECB file gives every pair of the currencies the platform bills in. A stored rate is never changed: an import
that gives a stored day another rate is refused, so a consolidated report of the past reads the same later.

A rate is looked up for a day: that day's, else the latest of the BILLING_FX_LOOKBACK_DAYS days before (the
ECB publishes none at weekends and on TARGET holidays). None in that window is MissingRate, naming the day and
the pair: an amount is never converted at a made-up 1.0.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext

from billing.ledger.periods import month_end
from billing.models import ExchangeRate
from billing.pricing import MINOR_UNITS
from billing.time_zone import platform_tz
from scheduling.api import DomainError, clock

PIVOT = "EUR"  # the ECB's base: cross rates go through it
RATE_PLACES = Decimal("1e-10")  # ExchangeRate.rate's decimal places; a derived rate is rounded to them
MAX_RATE = Decimal("1e9")
RULES = ("line", "period-end")  # the day a line is converted at: its own, or its billing month's last
MAX_IMPORT_BYTES = 5 * 2**20


class RateError(DomainError):
    """A rate that cannot be stored (zero, negative, in the future, not a number, an unknown currency)."""

    field = "rate"


class MissingRate(DomainError):
    """No rate for a pair on a day (nor in the days before that may stand for it): understood, not processable."""

    status = 422
    title = "No exchange rate"
    field = "currency"


def today() -> date:
    return clock.now().astimezone(platform_tz()).date()


def rule() -> str:
    """The operator's setting BILLING_FX_RATE_DAY: `line` (each line at its own day's rate, the default) or
    `period-end` (every line of a billing month at the month's last day's rate, today's while it is open)."""
    chosen = str(getattr(settings, "BILLING_FX_RATE_DAY", "line") or "line").strip().lower()
    if chosen not in RULES:
        raise ValueError(f"BILLING_FX_RATE_DAY must be one of {', '.join(RULES)}, not {chosen!r}")
    return chosen


def lookback_days() -> int:
    return int(getattr(settings, "BILLING_FX_LOOKBACK_DAYS", 4))


def rate_day(day: date, period: date, *, chosen: str | None = None) -> date:
    """The day whose rate converts a line of `day` in billing month `period`, by the operator's rule."""
    if (chosen or rule()) == "line":
        return day
    return min(month_end(period), today())


def check_code(raw, name: str) -> str:
    code = str(raw or "").strip().upper()
    if code not in MINOR_UNITS:
        raise RateError({name: gettext("%(code)s is not a currency the platform bills in (%(known)s)") % {
            "code": code[:10] or "''", "known": ", ".join(sorted(MINOR_UNITS))}})
    return code


def check_rate(raw, name: str = "rate") -> Decimal:
    """A positive rate, at most 10 decimal places kept; zero, negative or not a number is refused."""
    try:
        value = Decimal(str(raw).strip())
    except (InvalidOperation, ValueError):
        raise RateError({name: gettext("%(value)s is not a number") % {"value": repr(str(raw)[:30])}}) from None
    if not value.is_finite() or value <= 0:
        raise RateError({name: gettext("a rate must be more than 0, not %(value)s") % {"value": str(raw)[:30]}})
    if value >= MAX_RATE:
        raise RateError({name: gettext("a rate must be below %(most)s") % {"most": f"{MAX_RATE:,.0f}"}})
    return value.quantize(RATE_PLACES)


def check_day(value: date, name: str = "day") -> date:
    if value > today():
        raise RateError({name: gettext("%(day)s is in the future (today is %(today)s): rates are of days that "
                                       "have been") % {"day": value.isoformat(), "today": today().isoformat()}})
    return value


@transaction.atomic
def add_rate(*, base, quote, day: date, rate, user=None, source: str = "console") -> ExchangeRate:
    """One rate, checked: both codes known and different, the rate positive, the day not in the future and
    not already rated for the pair. RateError by field otherwise, nothing stored."""
    errors: dict[str, list[str]] = {}
    values = {}
    for name, check, raw in (("base", check_code, base), ("quote", check_code, quote), ("rate", check_rate, rate),
                             ("day", check_day, day)):
        try:
            values[name] = check(raw, name)
        except RateError as error:
            errors.update(error.errors)
    if not errors and values["base"] == values["quote"]:
        errors["quote"] = [gettext("the quote currency must differ from the base")]
    if not errors and ExchangeRate.objects.filter(base=values["base"], quote=values["quote"], day=day).exists():
        errors["day"] = [gettext("%(base)s/%(quote)s already has a rate for %(day)s: a stored rate never changes") % {
            "base": values["base"], "quote": values["quote"], "day": day.isoformat()}]
    if errors:
        raise RateError(errors)
    return ExchangeRate.objects.create(**values, source=source, created=clock.now(),
                                       created_by=user if getattr(user, "is_authenticated", False) else None)


# --------------------------------------------------------------------------- the ECB's CSV

@dataclass
class ImportResult:
    stored: int = 0
    unchanged: int = 0  # already stored with the same rate
    days: list[date] = field(default_factory=list)
    skipped_currencies: list[str] = field(default_factory=list)  # the file's columns the platform does not bill in


def _ecb_day(raw: str) -> date:
    text = raw.strip()
    for pattern in ("%Y-%m-%d", "%d %B %Y"):
        try:
            return datetime.strptime(text, pattern).date()
        except ValueError:
            continue
    raise ValueError(text)


def parse_ecb_csv(text: str) -> tuple[list[tuple[date, str, Decimal]], list[str]]:
    """(day, currency, rate per 1 EUR) of each cell of the ECB's eurofxref CSV (the daily file or the
    history: `Date, USD, JPY, ...`, days as 2026-03-02 or 2 March 2026, N/A or empty for none), and the
    columns skipped as currencies the platform does not bill in. RateError naming every bad cell."""
    rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    if not rows or not rows[0] or rows[0][0].strip().lower() != "date":
        raise RateError({"file": gettext("not an ECB reference-rate CSV: the first column must be Date")})
    header = [h.strip().upper() for h in rows[0]]
    known = {i: code for i, code in enumerate(header) if i and code in MINOR_UNITS and code != PIVOT}
    skipped = sorted({code for i, code in enumerate(header) if i and code and i not in known})
    errors: dict[str, list[str]] = {}
    cells: list[tuple[date, str, Decimal]] = []
    seen: set[tuple[date, str]] = set()
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        where = f"line {number}"
        try:
            day = _ecb_day(row[0])
        except ValueError:
            errors.setdefault(f"{where}, Date", []).append(
                gettext("%(value)s is not a day (2026-03-02 or 2 March 2026)") % {"value": repr(row[0][:30])})
            continue
        try:
            check_day(day)
        except RateError as error:
            errors[f"{where}, Date"] = error.errors["day"]
            continue
        for index, code in known.items():
            raw = row[index].strip() if index < len(row) else ""
            if raw in ("", "N/A"):
                continue
            try:
                rate = check_rate(raw)
            except RateError as error:
                errors[f"{where}, {code}"] = error.errors["rate"]
                continue
            if (day, code) in seen:
                errors[f"{where}, {code}"] = [gettext("%(day)s appears twice") % {"day": day.isoformat()}]
                continue
            seen.add((day, code))
            cells.append((day, code, rate))
    if errors:
        raise RateError(errors)
    if not cells:
        raise RateError({"file": gettext("no rate of a currency the platform bills in (%(known)s)") % {
            "known": ", ".join(sorted(set(MINOR_UNITS) - {PIVOT}))}})
    return cells, skipped


@transaction.atomic
def import_ecb_csv(text: str, *, user=None, source: str = "ecb-csv") -> ImportResult:
    """Store the file's rates as EUR -> currency, all or none: a bad cell, or a stored day given another
    rate, refuses the whole file (RateError by line and column)."""
    if len(text.encode()) > MAX_IMPORT_BYTES:
        raise RateError({"file": gettext("the file is larger than %(mib)s MiB") % {"mib": MAX_IMPORT_BYTES // 2**20}})
    cells, skipped = parse_ecb_csv(text)
    days = sorted({day for day, _, _ in cells})
    stored = {(r.day, r.quote): r.rate for r in ExchangeRate.objects.filter(base=PIVOT, day__in=days)}
    errors: dict[str, list[str]] = {}
    new = []
    result = ImportResult(days=days, skipped_currencies=skipped)
    for day, code, rate in cells:
        before = stored.get((day, code))
        if before is None:
            new.append(ExchangeRate(base=PIVOT, quote=code, day=day, rate=rate, source=source, created=clock.now(),
                                    created_by=user if getattr(user, "is_authenticated", False) else None))
        elif before == rate:
            result.unchanged += 1
        else:
            errors[f"{day.isoformat()}, {code}"] = [gettext("already stored as %(before)s: a stored rate never "
                                                           "changes") % {"before": before}]
    if errors:
        raise RateError(errors)
    ExchangeRate.objects.bulk_create(new)
    result.stored = len(new)
    return result


# --------------------------------------------------------------------------- looking rates up

class RateBook:
    """Rates into `target`, read once for a range of days: `rate(currency, day)` gives how many `target`
    units one unit of `currency` bought on `day` (through EUR where no direct rate is stored)."""

    def __init__(self, target: str, days: Iterable[date] = ()):
        self.target = target
        self._known: dict[tuple[str, str], dict[date, Decimal]] = {}
        self._cache: dict[tuple[str, date], Decimal] = {}
        days = list(days)
        rows = ExchangeRate.objects.all()
        if days:
            rows = rows.filter(day__gte=min(days) - timedelta(days=lookback_days()), day__lte=max(days))
        for base, quote, day, value in rows.values_list("base", "quote", "day", "rate"):
            self._known.setdefault((base, quote), {})[day] = value

    def _stored(self, base: str, quote: str, day: date) -> tuple[Decimal, date] | None:
        """The pair's rate on `day` or the latest of the lookback days before, direct or inverted."""
        for back in range(lookback_days() + 1):
            on = day - timedelta(days=back)
            if (value := self._known.get((base, quote), {}).get(on)) is not None:
                return value, on
            if (value := self._known.get((quote, base), {}).get(on)) is not None:
                return Decimal(1) / value, on
        return None

    def rate(self, currency: str, day: date) -> Decimal:
        if currency == self.target:
            return Decimal(1)
        key = (currency, day)
        if key not in self._cache:
            self._cache[key] = self._find(currency, day)
        return self._cache[key]

    def _find(self, currency: str, day: date) -> Decimal:
        direct = self._stored(currency, self.target, day)
        if direct is not None:
            return direct[0].quantize(RATE_PLACES)
        if PIVOT not in (currency, self.target):
            via_from, via_to = self._stored(PIVOT, currency, day), self._stored(PIVOT, self.target, day)
            if via_from is not None and via_to is not None:
                return (via_to[0] / via_from[0]).quantize(RATE_PLACES)
        raise MissingRate(gettext("no %(source)s to %(target)s exchange rate for %(day)s (nor for the %(back)s days "
                                  "before): store one on the console's exchange-rate page or import the ECB's rates "
                                  "of that day") % {"source": currency, "target": self.target,
                                                    "day": day.isoformat(), "back": lookback_days()})
